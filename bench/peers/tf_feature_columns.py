#!/usr/bin/env python3
"""TF 2.15 peer of bench/feature_columns.c: the same census-style columns
from the same CSV to the input layer, one thread (intra/inter op = 1).
    python tf_feature_columns.py --csv census.csv [--batch 256] [--epochs 3] [--mode graph|keras]
graph: tf.data (TextLineDataset -> batch -> decode_csv) + tf.compat.v1
feature_column.input_layer in a graph, run by a v1 Session;
keras: the TF2 path, tf.keras DenseFeatures in a tf.function over the same
dataset.  Prints key=value lines (examples_per_sec = the best epoch)."""
import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

NUMERIC = ["age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
HEADER = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation", "relationship",
          "capital_gain", "capital_loss", "hours_per_week", "native_country", "label"]
STR = {"workclass", "education", "marital_status", "occupation", "relationship", "native_country"}
WORKCLASS = ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov", "Without-pay",
             "Never-worked"]
EDUCATION = ["Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
             "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"]
MARITAL = ["Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed", "Married-spouse-absent",
           "Married-AF-spouse"]
RELATIONSHIP = ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"]


def columns(fc):
    num = [fc.numeric_column(k) for k in NUMERIC]
    edu = fc.categorical_column_with_vocabulary_list("education", EDUCATION, num_oov_buckets=1)
    return num + [
        fc.bucketized_column(num[0], [18, 25, 30, 35, 40, 45, 50, 55, 60, 65]),
        fc.bucketized_column(num[5], [20, 30, 40, 50, 60]),
        fc.indicator_column(fc.categorical_column_with_vocabulary_list("workclass", WORKCLASS, num_oov_buckets=1)),
        fc.indicator_column(edu),
        fc.indicator_column(fc.categorical_column_with_vocabulary_list("marital_status", MARITAL, num_oov_buckets=1)),
        fc.indicator_column(fc.categorical_column_with_vocabulary_list("relationship", RELATIONSHIP,
                                                                       num_oov_buckets=1)),
        fc.embedding_column(fc.categorical_column_with_hash_bucket("occupation", 1000), 8),
        fc.embedding_column(fc.categorical_column_with_hash_bucket("native_country", 1000), 8),
        fc.indicator_column(fc.crossed_column(["education", "occupation"], 100)),
    ]


def dataset(path, batch):
    defaults = [[""] if h in STR else ([0] if h == "label" else [0.0]) for h in HEADER]

    def parse(lines):
        vals = tf.io.decode_csv(lines, defaults)
        d = dict(zip(HEADER, vals))
        d.pop("label")
        return {k: tf.expand_dims(v, -1) for k, v in d.items()}

    return tf.data.TextLineDataset(path).skip(1).batch(batch).map(parse)


def run_graph(a):
    tf.compat.v1.disable_eager_execution()
    g = tf.Graph()
    with g.as_default():
        it = tf.compat.v1.data.make_initializable_iterator(dataset(a.csv, a.batch))
        feats = it.get_next()
        out = tf.compat.v1.feature_column.input_layer(feats, columns(tf.compat.v1.feature_column))
        cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
        with tf.compat.v1.Session(config=cfg) as s:
            s.run([tf.compat.v1.global_variables_initializer(), tf.compat.v1.tables_initializer()])
            return loop(a, lambda: s.run(it.initializer), lambda: s.run(out).shape)


def run_keras(a):
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    layer = tf.keras.layers.DenseFeatures(columns(tf.feature_column))
    ds = dataset(a.csv, a.batch)
    step = tf.function(lambda x: layer(x))
    state = {}

    def reset():
        state["it"] = iter(ds)

    def one():
        return step(next(state["it"])).shape

    return loop(a, reset, one)


def loop(a, reset, one):
    best, rows, width = 0.0, 0, 0
    for e in range(a.epochs):
        reset()
        rows = 0
        t0 = time.perf_counter()
        while True:
            try:
                shp = one()
            except (tf.errors.OutOfRangeError, StopIteration):
                break
            rows += shp[0]
            width = shp[1]
        sec = time.perf_counter() - t0
        print("epoch_sec_%d=%.4f" % (e, sec))
        best = max(best, rows / sec)
    return best, rows, width


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--csv", required=True)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--mode", default="graph", choices=["graph", "keras"])
    a = p.parse_args()
    best, rows, width = run_graph(a) if a.mode == "graph" else run_keras(a)
    print("impl=tf_%s\ntf_version=%s\nrows=%d\nbatch=%d\nwidth=%d\nthreads=1\nexamples_per_sec=%.1f" % (
        a.mode, tf.__version__, rows, a.batch, width, best))


if __name__ == "__main__":
    main()
