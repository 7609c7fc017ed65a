#!/usr/bin/env python3
"""TF 2.15 peer of bench/scaling: the same distributed job (Fashion-MNIST
DNNClassifier [512, 256], batch 128, SGD, one thread per process) with TF's
own parameter-server runtime (TF_CONFIG, gRPC on loopback), one process per
task, through tf.estimator.train_and_evaluate as TF's docs prescribe.
    TF_CONFIG=... python tf_ps_job.py --model_dir DIR --steps N [--fashion DIR]
A PS task never returns (TF's server.join()); the caller kills it. A trainer
prints key=value: global_steps_per_sec (global step delta over wall time
from the global step's 10% mark to this trainer's last step),
first_step_after_launch_s, maxrss_mb."""
import argparse
import gzip
import json
import os
import resource
import time

T_START = time.perf_counter()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def read_idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


class Rate(tf.estimator.SessionRunHook):
    def __init__(self, warm):
        self.n, self.warm = 0, warm
        self.first = None
        self.t0 = self.t1 = 0.0
        self.g0 = self.g1 = 0

    def begin(self):
        self.gs = tf.compat.v1.train.get_global_step()

    def before_run(self, run_context):
        return tf.estimator.SessionRunArgs(self.gs)

    def after_run(self, run_context, run_values):
        t = time.perf_counter()
        if self.first is None:
            self.first = t - T_START
        self.n += 1
        g = int(run_values.results)
        if self.g0 == 0 and g >= self.warm:  # the global step's 10% mark (other trainers count too)
            self.t0, self.g0 = t, g
        self.t1, self.g1 = t, g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model_dir", required=True)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    xtr = read_idx(a.fashion + "/train-images-idx3-ubyte.gz").reshape(-1, 784)
    ytr = read_idx(a.fashion + "/train-labels-idx1-ubyte.gz").astype(np.int32)

    def input_fn():
        ds = tf.data.Dataset.from_tensor_slices(({"image": xtr}, ytr)).cache().shuffle(10000).repeat().batch(128)
        ds = ds.map(lambda x, y: ({"image": tf.cast(x["image"], tf.float32) / 255.0}, y))
        return ds.prefetch(1)

    session_config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    config = tf.estimator.RunConfig(model_dir=a.model_dir, session_config=session_config, log_step_count_steps=100,
                                    save_checkpoints_steps=100000, save_summary_steps=100000)
    cols = [tf.feature_column.numeric_column("image", shape=(784,))]
    est = tf.estimator.DNNClassifier(hidden_units=[512, 256], feature_columns=cols, n_classes=10,
                                     optimizer=lambda: tf.keras.optimizers.legacy.SGD(0.05), config=config)
    rate = Rate(max(2, a.steps // 10))
    train = tf.estimator.TrainSpec(input_fn, max_steps=a.steps, hooks=[rate])
    evals = tf.estimator.EvalSpec(input_fn, steps=1, start_delay_secs=10 ** 6, throttle_secs=10 ** 6)
    tf.estimator.train_and_evaluate(est, train, evals)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    if rate.t1 > rate.t0 and rate.g1 > rate.g0:
        print("role=%s:%s global_steps_per_sec=%.1f first_step_after_launch_s=%.2f maxrss_mb=%d" % (
            task.get("type", "local"), task.get("index", 0), (rate.g1 - rate.g0) / (rate.t1 - rate.t0), rate.first, rss),
            flush=True)


if __name__ == "__main__":
    main()
