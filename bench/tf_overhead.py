"""The loom.tf side of bench/tf_overhead.sh: bench/canned.c's iris_dnn recipe
(DNNClassifier [10, 10], 4 numeric columns, Adagrad 0.1, batches of 32 from a
shuffle of the 120 training rows, repeat, prefetch 16; RunConfig seed 42,
no step logging) written as a TF 2.15 program on loom.tf, training --steps
steps from a fresh model_dir.
Prints key=value lines: impl=loom.tf, steps, train_sec and train_cpu_sec (the
train() call's wall and process CPU time)."""
import argparse
import tempfile
import time

import numpy as np

import loom.tf as tf

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=1000)
p.add_argument("--iris", default="/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv")
a = p.parse_args()
NAMES = ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth"]
data = np.loadtxt(a.iris, delimiter=",", skiprows=1)[:120]
features = {k: data[:, i].astype(np.float32) for i, k in enumerate(NAMES)}
labels = data[:, 4].astype(np.int64)


def input_fn():
    return tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(120, seed=7).repeat().batch(32).prefetch(16)


est = tf.estimator.DNNClassifier(
    hidden_units=[10, 10], feature_columns=[tf.feature_column.numeric_column(k) for k in NAMES], n_classes=3,
    optimizer=tf.keras.optimizers.legacy.Adagrad(learning_rate=0.1), model_dir=tempfile.mkdtemp(),
    config=tf.estimator.RunConfig(tf_random_seed=42, log_step_count_steps=100000000))
t0, c0 = time.perf_counter(), time.process_time()
est.train(input_fn, steps=a.steps)
t1, c1 = time.perf_counter(), time.process_time()
print("impl=loom.tf\nsteps=%d\ntrain_sec=%.4f\ntrain_cpu_sec=%.4f" % (a.steps, t1 - t0, c1 - c0))
