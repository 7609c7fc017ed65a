#!/usr/bin/env python3
"""Generates tests/fixtures/fc_layer/: TF 2.15's tf.compat.v1.feature_column
input_layer and linear_model outputs (and the variable names TF creates) for
fixed inputs and fixed weights, and numpy statistics of a small CSV for the
analyzer.  Run with the TF peer venv:
    $(scripts/peer_venv.sh tf) scripts/gen_fc_layer_fixtures.py
The weights are a formula both sides compute (wval below): every variable
is assigned after initialisation, so no initializer's random numbers matter.
"""
import os
import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "fc_layer")
os.makedirs(OUT, exist_ok=True)
fc = tf.compat.v1.feature_column


def wval(name, shape):
    """Weight formula shared with tests/test_feature_columns.c."""
    k = len(name)
    a = np.zeros(shape, np.float32)
    if len(shape) == 1:
        for i in range(shape[0]):
            a[i] = ((i * 7 + k) % 13 - 6) / 8.0
    else:
        for i in range(shape[0]):
            for j in range(shape[1]):
                a[i, j] = ((i * 7 + j * 3 + k) % 13 - 6) / 8.0
    return a


COLORS = ["red", "green", "blue", "black", "white", "gold"]
with open(os.path.join(OUT, "colors.txt"), "w") as f:
    f.write("\n".join(COLORS) + "\n")


def ragged_sparse(rows, dtype):
    idx, vals = [], []
    width = max([len(r) for r in rows] + [1])
    for i, r in enumerate(rows):
        for j, v in enumerate(r):
            idx.append([i, j])
            vals.append(v)
    if not idx:
        return tf.SparseTensor(np.zeros((0, 2), np.int64), tf.constant([], dtype), [len(rows), width])
    return tf.SparseTensor(np.array(idx, np.int64), tf.constant(vals, dtype), [len(rows), width])


def features():
    return {
        "age": tf.constant([[23.0], [35.5], [61.0], [17.0]], tf.float32),
        "hw": tf.constant([[0.2, 1.9], [1.0, 0.4], [3.0, 1.5], [-1.0, 0.5]], tf.float32),
        "city": tf.constant([["sf", "la"], ["ny", ""], ["", ""], ["sf", "zz"]]),
        "tags": ragged_sparse([["a", "b"], [], ["c"], ["a", "a", "d"]], tf.string),
        "uid": tf.constant([[3], [7], [-1], [0]], tf.int64),
        "code": ragged_sparse([[5], [1, 2], [], [9]], tf.int64),
        "wkey": ragged_sparse([[2.0], [0.5, 1.5], [], [3.0]], tf.float32),
        "zip": tf.constant([[94110], [10001], [60601], [94110]], tf.int64),
        "uid2": tf.constant([[1], [1], [2], [7]], tf.int64),
        "color": tf.constant([["blue"], ["pink"], ["red"], ["gold"]]),
    }


def columns(kind):
    age = fc.numeric_column("age")
    hw = fc.numeric_column("hw", shape=(2,), normalizer_fn=lambda x: (x - 1.0) / 2.0)
    age_b = fc.bucketized_column(age, [18.0, 30.0, 50.0])
    hw_b = fc.bucketized_column(hw, [0.5, 1.5])
    city = fc.categorical_column_with_vocabulary_list("city", ["la", "ny", "sf"], num_oov_buckets=2)
    tags = fc.categorical_column_with_hash_bucket("tags", 10)
    uid = fc.categorical_column_with_identity("uid", 8)
    code = fc.categorical_column_with_vocabulary_list("code", [9, 5, 1], dtype=tf.int64, default_value=0)
    code_w = fc.weighted_categorical_column(code, "wkey")
    zipc = fc.categorical_column_with_hash_bucket("zip", 20, dtype=tf.int64)
    color = fc.categorical_column_with_vocabulary_file("color", os.path.join(OUT, "colors.txt"), num_oov_buckets=2)
    cross = fc.crossed_column(["city", age_b], 16)
    cross2 = fc.crossed_column(["tags", "zip"], 7)
    if kind == "input_layer":
        uid2 = fc.categorical_column_with_identity("uid2", 8)
        shared = fc.shared_embedding_columns([uid2, uid], 3, combiner="sum")
        return [age, hw, age_b, hw_b, fc.indicator_column(city), fc.indicator_column(tags),
                fc.embedding_column(uid, 3), fc.embedding_column(code_w, 2, combiner="sqrtn"),
                fc.indicator_column(cross), fc.indicator_column(cross2), fc.embedding_column(zipc, 2, combiner="sum"),
                fc.indicator_column(code_w), fc.indicator_column(color)] + list(shared)
    return [age, hw, age_b, city, tags, uid, code_w, cross, cross2, zipc, color, fc.embedding_column(hw_b, 2)]


def run(kind, units=2, combiner="sqrtn"):
    g = tf.Graph()
    with g.as_default():
        feats = features()
        cols = columns(kind)
        if kind == "input_layer":
            out = fc.input_layer(feats, cols)
        else:
            out = fc.linear_model(feats, cols, units=units, sparse_combiner=combiner)
        vs = tf.compat.v1.global_variables()
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            s.run(tf.compat.v1.tables_initializer())
            for v in vs:
                name = v.name.split(":")[0]
                v.load(wval(name, v.shape.as_list()), s)
            y = s.run(out)
    path = os.path.join(OUT, kind + ".txt")
    with open(path, "w") as f:
        f.write("vars %d\n" % len(vs))
        for v in sorted(vs, key=lambda v: v.name):
            f.write("var %s %s\n" % (v.name.split(":")[0], " ".join(str(d) for d in v.shape.as_list())))
        f.write("out %d %d\n" % y.shape)
        for r in y:
            f.write(" ".join("%.9g" % x for x in r) + "\n")
    print("wrote", path, y.shape)


def analyzer_data():
    rng = np.random.RandomState(14)
    n = 200
    carat = np.round(rng.gamma(2.0, 0.4, n), 2)
    depth = np.round(rng.normal(61.7, 1.4, n), 1)
    cut = rng.choice(["Ideal", "Premium", "Good", "Very Good", "Fair"], n, p=[0.4, 0.25, 0.15, 0.15, 0.05])
    clarity = rng.choice([1, 2, 3, 4, 5, 6, 7, 8], n)
    path = os.path.join(OUT, "analyzer.csv")
    with open(path, "w") as f:
        f.write("carat,cut,depth,clarity\n")
        for i in range(n):
            f.write("%.2f,%s,%.1f,%d\n" % (carat[i], cut[i], depth[i], clarity[i]))
    carat = carat.astype(np.float32)
    depth = depth.astype(np.float32)
    with open(os.path.join(OUT, "analyzer_expected.txt"), "w") as f:
        for key, x, nb in (("carat", carat, 4), ("depth", depth, 10)):
            s = np.sort(x.astype(np.float64))
            b = []
            for k in range(1, nb):
                rank = -(-k * n // nb)  # ceil(k n / nb), 1-based
                v = np.float32(s[rank - 1])
                if not b or v > b[-1]:
                    b.append(v)
            f.write("quantiles %s %d %d %s\n" % (key, nb, len(b), " ".join("%.9g" % v for v in b)))
        for key, x in (("carat", carat), ("depth", depth)):
            xd = x.astype(np.float64)
            f.write("moments %s %.17g %.17g\n" % (key, xd.mean(), xd.std()))
        for key, vals, top_k, thr in (("cut", cut, 0, 1), ("cut", cut, 3, 1), ("clarity", clarity, 0, 26)):
            u, c = np.unique([str(v) for v in vals], return_counts=True)
            items = sorted(zip(u, c), key=lambda t: (-t[1], t[0].encode()))
            items = [t for t in items if t[1] >= thr]
            if top_k > 0:
                items = items[:top_k]
            f.write("vocab %s %d %d %d %s\n" % (key, top_k, thr, len(items), "|".join(t[0] for t in items)))


if __name__ == "__main__":
    run("input_layer")
    run("linear_model", units=2, combiner="sqrtn")
    analyzer_data()
