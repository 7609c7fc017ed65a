#!/usr/bin/env python3
"""Generates python/tests/fixtures/tf_normalizer.json: TF 2.15's outputs of
numeric_column / sequence_numeric_column with normalizer_fn on fixed
features (tf.keras.layers.DenseFeatures and
tf.keras.experimental.SequenceFeatures), for
python/tests/test_tf_normalizer.py.  Run with the TF peer venv:
    $(bash scripts/peer_venv.sh tf) scripts/gen_tf_normalizer_fixtures.py
"""
import json
import os

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests", "fixtures")
fc = tf.feature_column

# the features and columns the test builds the same way
FEATURES = {
    "x": [[1.0], [3.0], [6.5], [-2.0]],
    "v": [[0.2, 1.9], [1.0, 0.4], [3.0, 1.5], [0.0, 7.0]],
    "c": [[-3.0], [0.1], [0.6], [2.0]],
    "b": [[-0.1], [0.3], [1.0], [2.5]],
}
SEQ = [[1.5, 2.0, -3.0], [0.25], [], [9.0, 8.0]]  # "num": one sequence per example


def columns():
    return [
        fc.numeric_column("x", normalizer_fn=lambda x: (x - 3.0) / 2.0),
        fc.numeric_column("v", shape=(2,), normalizer_fn=tf.math.log1p),
        fc.numeric_column("c", normalizer_fn=lambda x: tf.clip_by_value(x * 2.0, -1.0, 1.0)),
        fc.bucketized_column(fc.numeric_column("b", normalizer_fn=lambda x: x * 10.0), [0.0, 5.0, 20.0]),
    ]


def main():
    feats = {k: tf.constant(v, tf.float32) for k, v in FEATURES.items()}
    dense = tf.keras.layers.DenseFeatures(columns())(feats).numpy()
    # sequence: TF hands the normalizer the SparseTensor; the padding stays default_value
    idx = [[i, j] for i, r in enumerate(SEQ) for j in range(len(r))]
    vals = [v for r in SEQ for v in r]
    sp = tf.SparseTensor(np.array(idx, np.int64), tf.constant(vals, tf.float32), [len(SEQ), max(map(len, SEQ))])
    scol = tf.feature_column.sequence_numeric_column("num", default_value=-1.0, normalizer_fn=lambda s: s * 0.5)
    seq, length = tf.keras.experimental.SequenceFeatures([scol])({"num": sp})
    out = {"tf_version": tf.__version__, "features": FEATURES, "dense": dense.tolist(), "seq": SEQ,
           "seq_dense": seq.numpy().tolist(), "seq_length": length.numpy().tolist()}
    with open(os.path.join(OUT, "tf_normalizer.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
