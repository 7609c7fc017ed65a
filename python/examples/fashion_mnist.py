#!/usr/bin/env python3
"""Fashion-MNIST with loom from Python: the IDX files are read with numpy,
a canned DNNClassifier (hidden units 128, 64; Adagrad 0.05, as
examples/fmnist_canned.c) is trained through the Estimator, evaluated,
exported, and the export is served by the resident predictor.

    python3 python/examples/fashion_mnist.py [--steps N] [--data DIR]

DIR defaults to /usr/share/datasets/fashion-mnist (Debian's
dataset-fashion-mnist)."""
import argparse
import gzip
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import loom  # noqa: E402


def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data_dir, part):
    x = read_idx(os.path.join(data_dir, "%s-images-idx3-ubyte.gz" % part))
    y = read_idx(os.path.join(data_dir, "%s-labels-idx1-ubyte.gz" % part))
    return (x.reshape(len(x), -1).astype(np.float32) / 255.0), y.astype(np.int32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--model-dir", default=None)
    a = ap.parse_args()
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    model_dir = a.model_dir or tempfile.mkdtemp(prefix="loom_fmnist_py_")

    fc = loom.FeatureColumns()
    image = fc.numeric("image", shape=(784,))
    est = loom.DNNClassifier(hidden_units=[128, 64], feature_columns=[image], n_classes=10, model_dir=model_dir,
                             learning_rate=0.05, random_seed=1)

    def train_input(mode):
        return loom.Dataset.from_tensor_slices({"image": xtr, "label": ytr}, label="label") \
            .shuffle(10000, seed=1).repeat().batch(128)

    def eval_input(mode):
        return loom.Dataset.from_tensor_slices({"image": xte, "label": yte}, label="label").batch(1000)

    t0 = time.time()
    est.train(train_input, steps=a.steps)
    t1 = time.time()
    r = est.evaluate(eval_input)
    print("trained %d steps in %.1f s; test accuracy %.4f, loss %.4f" % (a.steps, t1 - t0, r["accuracy"], r["loss"]))

    path = est.export(os.path.join(model_dir, "export"), {"image": (np.float32, (None, 784))})
    pred = loom.Predictor(path)
    out = pred.predict({"image": xte}, signature="predict")
    acc = float((out["class_ids"].ravel() == yte).mean())
    t = time.perf_counter()
    for i in range(1000):
        pred.predict({"image": xte[i:i + 1]}, signature="predict")
    us = (time.perf_counter() - t) * 1e3
    print("exported to %s; predictor accuracy %.4f; batch-1 predict from Python: %.1f us/call" % (path, acc, us))
    print("test_accuracy=%.4f" % r["accuracy"])


if __name__ == "__main__":
    main()
