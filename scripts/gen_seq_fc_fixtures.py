#!/usr/bin/env python3
"""Generates python/tests/fixtures/seq_fc/: TF 2.15's sequence feature
columns over a batch of tf.train.Examples (their serialized bytes are in the
fixture too): make_parse_example_spec, each categorical column's ids per
step, tf.keras.experimental.SequenceFeatures's output (indicator_column,
embedding_column with a formula table, sequence_numeric_column) and
sequence_length, for python/tests/test_tf_sequence_columns.py.  Run with
the TF peer venv:
    $(bash scripts/peer_venv.sh tf) scripts/gen_seq_fc_fixtures.py
"""
import json
import os

import numpy as np
import tensorflow as tf
from tensorflow.python.feature_column import feature_column_v2 as fc2

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests", "fixtures", "seq_fc")
os.makedirs(OUT, exist_ok=True)
fc = tf.feature_column
COLORS = ["red", "green", "blue"]
with open(os.path.join(OUT, "colors.txt"), "w") as f:
    f.write("\n".join(COLORS) + "\n")

# one example per row; "" / [] = an empty sequence
ROWS = [
    {"ident": [1, 9, 0], "tok": [b"the", b"cat", b"sat"], "itok": [3, 11], "word": [b"a", b"zz", b"c"],
     "code": [20, 99, 10], "color": [b"blue", b"red"], "num": [1.5, 2.0, -3.0, 4.0], "pair": [1., 2., 3., 4., 5., 6.]},
    {"ident": [4], "tok": [b"dog"], "itok": [7, 7, 7, 7], "word": [b"b"], "code": [30], "color": [b"pink"],
     "num": [0.25, 0.5], "pair": [7., 8.]},
    {"ident": [], "tok": [], "itok": [], "word": [], "code": [], "color": [], "num": [], "pair": []},
    {"ident": [5, 2], "tok": [b"a", b"b", b"c", b"d"], "itok": [0], "word": [b"c", b"a"], "code": [10, 10],
     "color": [b"green", b"green", b"blue"], "num": [9.0, 8.0, 7.0, 6.0], "pair": [0.5, 1.5, 2.5, 3.5]},
]


def example(r):
    feat = {}
    for k, v in r.items():
        if k in ("num", "pair"):
            feat[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
        elif k in ("ident", "itok", "code"):
            feat[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
        else:
            feat[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
    return tf.train.Example(features=tf.train.Features(feature=feat)).SerializeToString()


SERIALIZED = [example(r) for r in ROWS]


def columns():
    return {
        "ident": fc.sequence_categorical_column_with_identity("ident", 6, default_value=5),
        "tok": fc.sequence_categorical_column_with_hash_bucket("tok", 7),
        "itok": fc.sequence_categorical_column_with_hash_bucket("itok", 5, dtype=tf.int64),
        "word": fc.sequence_categorical_column_with_vocabulary_list("word", ["a", "b", "c"], num_oov_buckets=2),
        "code": fc.sequence_categorical_column_with_vocabulary_list("code", [10, 20, 30]),
        "color": fc.sequence_categorical_column_with_vocabulary_file("color", os.path.join(OUT, "colors.txt"),
                                                                     vocabulary_size=3),
    }


def table(shape):
    """The embedding table formula shared with the test."""
    i, j = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    return (((i * 7 + j * 3) % 11 - 5) / 4.0).astype(np.float32)


def spec_json(spec):
    return {k: [type(v).__name__, v.dtype.name] for k, v in sorted(spec.items())}


def run():
    cats = columns()
    nums = {"num": fc.sequence_numeric_column("num"),
            "pair": fc.sequence_numeric_column("pair", shape=(2,), default_value=-1.0)}
    allc = list(cats.values()) + list(nums.values())
    spec = fc.make_parse_example_spec(allc)
    feats = tf.io.parse_example(tf.constant(SERIALIZED), spec)
    out = {"serialized_hex": [s.hex() for s in SERIALIZED], "spec": spec_json(spec), "columns": {}}
    for k, c in cats.items():
        ids = fc2.FeatureTransformationCache(feats).get(c, None)  # the column's ids as a SparseTensor
        ids = tf.sparse.to_dense(ids, default_value=-2).numpy()  # -2: past the row's end
        ind, ind_len = tf.keras.experimental.SequenceFeatures([fc.indicator_column(c)])(feats)
        layer = tf.keras.experimental.SequenceFeatures([fc.embedding_column(c, 3)])
        layer(feats)
        (var,) = layer.variables
        var.assign(table(var.shape))
        emb, emb_len = layer(feats)
        out["columns"][k] = {"ids": ids.tolist(), "indicator": ind.numpy().tolist(),
                             "sequence_length": ind_len.numpy().tolist(), "embedding": emb.numpy().tolist(),
                             "embedding_length": emb_len.numpy().tolist(), "num_buckets": int(c.num_buckets),
                             "variable": var.name}
    for k, c in nums.items():
        x, n = tf.keras.experimental.SequenceFeatures([c])(feats)
        out["columns"][k] = {"dense": x.numpy().tolist(), "sequence_length": n.numpy().tolist()}
    # two columns together (equal lengths): concatenated by column name
    both = [nums["pair"], fc.indicator_column(cats["ident"])]
    x, n = tf.keras.experimental.SequenceFeatures(both)({"ident": feats["ident"], "pair": feats["pair"]})
    out["ident_and_pair"] = {"dense": x.numpy().tolist(), "sequence_length": n.numpy().tolist()}
    # lengths that differ between columns fail the run
    try:
        tf.keras.experimental.SequenceFeatures([fc.indicator_column(cats["ident"]), nums["num"]])(feats)
        out["mismatch_fails"] = False
    except tf.errors.InvalidArgumentError:
        out["mismatch_fails"] = True
    with open(os.path.join(OUT, "seq_fc.json"), "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    run()
