#!/usr/bin/env python3
"""Reference values for loom.tf's model_fn ops of
python/tests/test_tf_model_fn_ops.py from TF 2.15: tf.math.top_k,
tf.math.in_top_k / tf.compat.v1.nn.in_top_k, tf.nn.zero_fraction,
tf.nn.log_poisson_loss, tf.nn.weighted_cross_entropy_with_logits, tf.pow,
tf.slice, tf.split, tf.unstack, tf.pad, tf.math.reduce_variance /
reduce_std / divide_no_nan / softplus, tf.reduce_any / reduce_all,
tf.clip_by_norm.

Writes python/tests/fixtures/tf_model_fn_ops.npz: "cases" (JSON: per case
the function's path under tf, its tensor arguments, its other keyword
arguments, the tensors to differentiate) and per case i the arrays
"<i>/in/<arg>", "<i>/out<k>" (TF's output k), "<i>/w<k>" (fixed weights of
float output k) and "<i>/grad/<arg>" (the gradient of sum_k sum(out_k * w_k)
with respect to each differentiated argument, by tf.GradientTape).
And tf.compat.v1.summary.image: "image_cases" (JSON: per case the name,
max_outputs and TF's Summary.Values' tags, heights, widths, colorspaces),
"image/<i>/in" (the images) and "image/<i>/px<j>" (the pixels of value j's
PNG, decoded by tf.io.decode_png).

Run: $(scripts/peer_venv.sh tf) scripts/gen_tf_model_fn_ops_fixtures.py
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests", "fixtures",
                   "tf_model_fn_ops.npz")
F32 = np.float32
TIES = np.array([[1, 3, 3, 2, 3, 0], [5, 5, -1, 5, 5, 5], [0, 0, 0, 0, 0, 0], [-2, 4, 1, 4, 7, 1]], F32)
NONFINITE = np.array([[1, 2, np.inf, 0], [1, np.nan, 3, 0], [3, 2, 1, 0], [-np.inf, 2, 5, 2], [2, 2, 2, 2]], F32)


def _rand(rng, *shape):
    return rng.randn(*shape).astype(F32)


def cases(rng):
    # (function path, tensor args, keyword args, differentiated args)
    return [
        ("math.top_k", {"input": TIES}, {"k": 1}, ["input"]),
        ("math.top_k", {"input": TIES}, {"k": 3}, ["input"]),
        ("nn.top_k", {"input": TIES}, {"k": 6}, ["input"]),
        ("math.top_k", {"input": _rand(rng, 2, 3, 5)}, {"k": 2}, ["input"]),
        ("math.top_k", {"input": _rand(rng, 7)}, {}, ["input"]),
        ("math.top_k", {"input": TIES}, {"k": 2, "index_type": "int64"}, []),
        ("math.top_k", {"input": np.array([[4, 1, 4, 9], [2, 2, 0, 2]], np.int32)}, {"k": 3}, []),
        ("math.in_top_k", {"targets": np.array([1, 0, 3, 3], np.int32), "predictions": TIES}, {"k": 1}, []),
        ("math.in_top_k", {"targets": np.array([2, 2, 5, 5], np.int32), "predictions": TIES}, {"k": 2}, []),
        ("math.in_top_k", {"targets": np.array([3, 2, 0, 2], np.int64), "predictions": TIES}, {"k": 3}, []),
        ("nn.in_top_k", {"targets": np.array([0, 1, 2, 3, 1], np.int32), "predictions": NONFINITE}, {"k": 2}, []),
        ("math.in_top_k", {"targets": np.array([0, 1, 1, 2, 3], np.int32), "predictions": NONFINITE}, {"k": 4}, []),
        ("compat.v1.nn.in_top_k", {"predictions": TIES, "targets": np.array([4, 4, 4, 5], np.int32)}, {"k": 1}, []),
        ("compat.v1.nn.in_top_k", {"predictions": TIES, "targets": np.array([1, 2, 0, 1], np.int32)}, {"k": 0}, []),
        ("nn.zero_fraction", {"value": np.array([[0, 1.5, 0], [2, 0, -1]], F32)}, {}, []),
        ("nn.zero_fraction", {"value": np.array([0, 3, 0, 0, 1, 2, 0, 4], np.int32)}, {}, []),
        ("math.zero_fraction", {"value": np.ones((3, 4), F32)}, {}, []),
        ("nn.log_poisson_loss", {"targets": np.abs(_rand(rng, 4, 3)) * 3, "log_input": _rand(rng, 4, 3)}, {},
         ["targets", "log_input"]),
        ("nn.log_poisson_loss", {"targets": np.array([[0, 0.5, 1, 1.5], [2, 3, 7, 10]], F32),
                                 "log_input": _rand(rng, 2, 4)}, {"compute_full_loss": True}, ["log_input"]),
        ("nn.weighted_cross_entropy_with_logits", {"labels": rng.rand(5, 3).astype(F32),
                                                   "logits": _rand(rng, 5, 3) * 4},
         {"pos_weight": 3.0}, ["labels", "logits"]),
        ("nn.weighted_cross_entropy_with_logits", {"labels": (rng.rand(4, 3) > 0.5).astype(F32),
                                                   "logits": _rand(rng, 4, 3) * 30,
                                                   "pos_weight": np.array([0.5, 1.0, 4.0], F32)}, {},
         ["logits", "pos_weight"]),
        ("compat.v1.nn.weighted_cross_entropy_with_logits", {"targets": rng.rand(3, 2).astype(F32),
                                                             "logits": _rand(rng, 3, 2)},
         {"pos_weight": 0.25}, ["logits"]),
        ("pow", {"x": np.abs(_rand(rng, 3, 4)) + 0.5, "y": _rand(rng, 3, 4)}, {}, ["x", "y"]),
        ("math.pow", {"x": np.abs(_rand(rng, 5)) + 0.1, "y": np.array(3.0, F32)}, {}, ["x"]),
        ("slice", {"input_": _rand(rng, 3, 4, 5)}, {"begin": [1, 0, 2], "size": [2, -1, 2]}, ["input_"]),
        ("split", {"value": _rand(rng, 4, 6)}, {"num_or_size_splits": 3, "axis": 1}, ["value"]),
        ("split", {"value": _rand(rng, 5, 3)}, {"num_or_size_splits": [2, -1, 1]}, ["value"]),
        ("unstack", {"value": _rand(rng, 3, 2, 4)}, {"axis": 1}, ["value"]),
        ("pad", {"tensor": _rand(rng, 2, 3)}, {"paddings": [[1, 0], [2, 1]], "constant_values": 1.5}, ["tensor"]),
        ("math.reduce_variance", {"input_tensor": _rand(rng, 4, 5)}, {"axis": 1}, ["input_tensor"]),
        ("math.reduce_std", {"input_tensor": _rand(rng, 3, 4)}, {"axis": 0, "keepdims": True}, ["input_tensor"]),
        ("math.reduce_std", {"input_tensor": _rand(rng, 6)}, {}, ["input_tensor"]),
        ("math.divide_no_nan", {"x": _rand(rng, 2, 3), "y": np.array([[1.5, 0, -2], [0, 0.5, 3]], F32)}, {},
         ["x", "y"]),
        ("reduce_any", {"input_tensor": rng.rand(3, 4) > 0.8}, {"axis": 1}, []),
        ("reduce_all", {"input_tensor": rng.rand(2, 3) > 0.2}, {}, []),
        ("math.reduce_all", {"input_tensor": np.array([[True, False], [True, True]])}, {"axis": 1, "keepdims": True},
         []),
        ("math.softplus", {"features": _rand(rng, 3, 3) * 5}, {}, ["features"]),
        ("clip_by_norm", {"t": _rand(rng, 3, 4)}, {"clip_norm": 0.5}, ["t"]),
        ("clip_by_norm", {"t": _rand(rng, 2, 2) * 0.01}, {"clip_norm": 0.5}, ["t"]),
    ]


def image_cases(rng):
    a = rng.randn(4, 3, 5, 3).astype(F32)
    a[1, 2, 3, 0] = np.nan
    d = (rng.rand(1, 2, 3, 3) * 4).astype(np.float64)
    d[0, 1, 1, 2] = np.inf
    return [
        ("img", a, 3),
        ("gray", (rng.rand(2, 4, 2, 1) * 0.5).astype(F32), 1),
        ("rgba", rng.randint(0, 256, (2, 3, 3, 4)).astype(np.uint8), 5),
        ("dbl", d, 2),
        ("zeros", np.zeros((1, 2, 2, 1), F32), 3),
        ("tiny", np.full((1, 2, 2, 3), -1e-7, F32), 3),
    ]


def images(rng, arrays):
    specs = []
    for i, (name, a, max_outputs) in enumerate(image_cases(rng)):
        with tf.Graph().as_default():
            s = tf.compat.v1.summary.image(name, tf.constant(a), max_outputs=max_outputs)
            with tf.compat.v1.Session() as sess:
                summary = tf.compat.v1.Summary.FromString(sess.run(s))
        arrays["image/%d/in" % i] = a
        spec = {"name": name, "max_outputs": max_outputs, "tags": [], "hwc": []}
        for j, v in enumerate(summary.value):
            spec["tags"].append(v.tag)
            spec["hwc"].append([v.image.height, v.image.width, v.image.colorspace])
            arrays["image/%d/px%d" % (i, j)] = tf.io.decode_png(v.image.encoded_image_string).numpy()
        specs.append(spec)
    return specs


def _fn(path):
    f = tf
    for p in path.split("."):
        f = getattr(f, p)
    return f


def main():
    rng = np.random.RandomState(11)
    arrays, specs = {}, []
    for i, (path, tensors, kwargs, diff) in enumerate(cases(rng)):
        for k, a in tensors.items():
            arrays["%d/in/%s" % (i, k)] = a
        vs = {k: (tf.Variable(a) if k in diff else tf.constant(a)) for k, a in tensors.items()}
        kw = dict(kwargs)
        if "index_type" in kw:
            kw["index_type"] = getattr(tf, kw["index_type"])
        with tf.GradientTape() as tape:
            outs = _fn(path)(**vs, **kw)
            outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
            ws = [np.asarray(rng.randn(*o.shape), F32) if o.dtype == tf.float32 else None for o in outs]
            terms = [tf.reduce_sum(o * w) for o, w in zip(outs, ws) if w is not None]
            loss = tf.add_n(terms) if terms else None
        if diff:
            grads = tape.gradient(loss, {k: vs[k] for k in diff})
            for k, gv in grads.items():
                arrays["%d/grad/%s" % (i, k)] = gv.numpy()
        for k, (o, w) in enumerate(zip(outs, ws)):
            arrays["%d/out%d" % (i, k)] = o.numpy()
            if w is not None:
                arrays["%d/w%d" % (i, k)] = w
        specs.append({"fn": path, "tensors": list(tensors), "kwargs": kwargs, "diff": diff, "outputs": len(outs)})
    image_specs = images(rng, arrays)
    np.savez_compressed(OUT, cases=np.array(json.dumps(specs)), image_cases=np.array(json.dumps(image_specs)),
                        **arrays)
    print("wrote", OUT, len(specs), "cases")


if __name__ == "__main__":
    main()
