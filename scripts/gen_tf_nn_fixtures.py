#!/usr/bin/env python3
"""Reference values for loom.tf's tf.nn convolution, pooling and
normalization ops (python/tests/test_tf_nn_ops.py) from TF 2.15.

Writes python/tests/fixtures/tf_nn.npz: "cases" (JSON: per case the tf.nn op,
its tensor arguments and its other keyword arguments) and per case i the
arrays "<i>/in/<arg>" (the tensor arguments), "<i>/w<k>" (fixed weights of
output k), "<i>/out<k>" (TF's output k) and "<i>/grad/<arg>" (the gradient
of sum_k sum(out_k * w_k) with respect to each tensor argument, by
tf.GradientTape).

Run: $(scripts/peer_venv.sh tf) scripts/gen_tf_nn_fixtures.py
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests", "fixtures", "tf_nn.npz")

X = (2, 7, 7, 3)  # NHWC images
F = (3, 3, 3, 4)  # HWIO filters
CASES = [
    ("conv2d", {"input": X, "filters": F}, {"strides": [1, 1, 1, 1], "padding": "SAME"}),
    ("conv2d", {"input": X, "filters": F}, {"strides": 1, "padding": "VALID"}),
    ("conv2d", {"input": X, "filters": F}, {"strides": [1, 2, 2, 1], "padding": "SAME"}),
    ("conv2d", {"input": X, "filters": (2, 2, 3, 4)}, {"strides": [2, 3], "padding": "VALID"}),
    ("conv2d", {"input": X, "filters": F}, {"strides": 1, "padding": "SAME", "dilations": 2}),
    ("conv2d", {"input": X, "filters": (2, 3, 3, 2)}, {"strides": 1, "padding": "VALID", "dilations": [1, 2, 1, 1]}),
    ("conv2d", {"input": X, "filters": F}, {"strides": 2, "padding": [[0, 0], [1, 2], [0, 1], [0, 0]]}),
    ("max_pool2d", {"input": X}, {"ksize": 2, "strides": 2, "padding": "SAME"}),
    ("max_pool2d", {"input": X}, {"ksize": [3, 2], "strides": [1, 2, 1, 1], "padding": "VALID"}),
    ("max_pool", {"input": X}, {"ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}),
    ("avg_pool2d", {"input": X}, {"ksize": 3, "strides": 2, "padding": "SAME"}),
    ("avg_pool2d", {"input": X}, {"ksize": 2, "strides": 2, "padding": "VALID"}),
    ("avg_pool", {"input": X}, {"ksize": [1, 2, 3, 1], "strides": 1, "padding": "SAME"}),
    ("conv2d_transpose", {"input": (2, 4, 4, 4), "filters": F}, {"output_shape": [2, 7, 7, 3], "strides": 2,
                                                                 "padding": "SAME"}),
    ("conv2d_transpose", {"input": (2, 4, 4, 4), "filters": F}, {"output_shape": [2, 8, 8, 3], "strides": 2,
                                                                 "padding": "SAME"}),
    ("conv2d_transpose", {"input": (2, 5, 5, 4), "filters": F}, {"output_shape": [2, 7, 7, 3],
                                                                 "strides": [1, 1, 1, 1], "padding": "VALID"}),
    ("moments", {"x": X}, {"axes": [0, 1, 2]}),
    ("moments", {"x": X}, {"axes": [0, 1, 2], "keepdims": True}),
    ("moments", {"x": (4, 5)}, {"axes": 1}),
    ("batch_normalization", {"x": X, "mean": (3,), "variance": (3,), "offset": (3,), "scale": (3,)},
     {"variance_epsilon": 0.001}),
    ("batch_normalization", {"x": (4, 5), "mean": (5,), "variance": (5,)},
     {"offset": None, "scale": None, "variance_epsilon": 0.01}),
]


def main():
    rng = np.random.RandomState(7)
    arrays, specs = {}, []
    for i, (op, tensors, kwargs) in enumerate(CASES):
        ins = {}
        for k, shape in tensors.items():
            a = rng.randn(*shape).astype(np.float32)
            if k == "variance":
                a = np.abs(a) + 0.1
            ins[k] = a
            arrays["%d/in/%s" % (i, k)] = a
        vs = {k: tf.Variable(v) for k, v in ins.items()}
        with tf.GradientTape() as tape:
            outs = getattr(tf.nn, op)(**vs, **kwargs)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            ws = [rng.randn(*o.shape).astype(np.float32) for o in outs]
            loss = tf.add_n([tf.reduce_sum(o * w) for o, w in zip(outs, ws)])
        grads = tape.gradient(loss, vs)
        for k, (o, w) in enumerate(zip(outs, ws)):
            arrays["%d/out%d" % (i, k)] = o.numpy()
            arrays["%d/w%d" % (i, k)] = w
        for k, gv in grads.items():
            arrays["%d/grad/%s" % (i, k)] = gv.numpy()
        specs.append({"op": op, "tensors": list(tensors), "kwargs": kwargs, "outputs": len(outs)})
    np.savez_compressed(OUT, cases=np.array(json.dumps(specs)), **arrays)
    print("wrote", OUT, len(specs), "cases")


if __name__ == "__main__":
    main()
