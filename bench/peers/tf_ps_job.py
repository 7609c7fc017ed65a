#!/usr/bin/env python3
"""TF 2.15 peer of bench/scaling: the same distributed job (Fashion-MNIST
DNNClassifier [512, 256], batch 128, SGD, one thread per process) with TF's
own parameter-server runtime (TF_CONFIG, gRPC on loopback), one process per
task, through tf.estimator.train_and_evaluate as TF's docs prescribe.
    TF_CONFIG=... python tf_ps_job.py --model_dir DIR --steps N [--fashion DIR] [--model dnn|sparse|wide_deep]
--model sparse: examples/dist_job --embed 100000 --hidden 64 (the same synthetic data: 1,024
examples, 16 features, 4 classes, an id in [0, 100000) through a 4-wide embedding column; a
DNNClassifier [64]). --model wide_deep: dist_job --embed 100000 --hidden 64 --wide_deep 1 (a
DNNLinearCombinedClassifier: wide = the id and id x bucketized x crossed into 100,000 buckets,
deep = x and an 8-wide embedding of the id; SGD 0.05 on both parts).
A PS task never returns (TF's server.join()); the caller kills it. A trainer
prints key=value: global_steps_per_sec (global step delta over wall time
from the global step's 10% mark to this trainer's last step),
first_step_after_launch_s, maxrss_mb."""
import argparse
import json
import os
import resource
import time

T_START = time.perf_counter()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from idx import read_idx  # noqa: E402  (bench/peers/idx.py)


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
    ap.add_argument("--model", default="dnn", choices=["dnn", "sparse", "wide_deep"])
    # default: the canned estimators' own optimizers (DNN: Adagrad, linear part: Ftrl); sgd: SGD 0.05 everywhere
    ap.add_argument("--optimizer", default="default", choices=["default", "sgd"])
    a = ap.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    if a.model == "dnn":
        xtr = read_idx(a.fashion + "/train-images-idx3-ubyte.gz").reshape(-1, 784)
        ytr = read_idx(a.fashion + "/train-labels-idx1-ubyte.gz").astype(np.int32)

        def input_fn():
            ds = tf.data.Dataset.from_tensor_slices(({"image": xtr}, ytr)).cache().shuffle(10000).repeat().batch(128)
            ds = ds.map(lambda x, y: ({"image": tf.cast(x["image"], tf.float32) / 255.0}, y))
            return ds.prefetch(1)
    else:  # dist_job's synthetic data with --embed 100000
        ns, nf, nc, embed = 1024, 16, 4, 100000
        i = np.arange(ns)[:, None]
        f = np.arange(nf)[None, :]
        x = (((i * 131 + f * 71) % 97) / 97.0 - 0.5).astype(np.float32)
        w = np.array([[((cl * 37 + ff * 13) % 11) - 5 for cl in range(nc)] for ff in range(nf)], np.float32)
        y = np.argmax(x @ w, axis=1).astype(np.int32)
        ids = (np.arange(ns, dtype=np.int64) * 7919) % embed
        y = np.where(ids % 2 == 0, ids % nc, y).astype(np.int32)

        def input_fn():
            ds = tf.data.Dataset.from_tensor_slices(({"x": x, "id": ids}, y)).shuffle(ns).repeat().batch(128)
            return ds.prefetch(1)

    # wide_deep: the linear part's fraction_of_zero_weights summary (a cond reading a PS variable) cannot
    # be colocated under the PS runtime ("Cannot merge devices with incompatible jobs"); soft placement
    # is TF's own way out
    session_config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1,
                                              allow_soft_placement=a.model == "wide_deep")
    config = tf.estimator.RunConfig(model_dir=a.model_dir, session_config=session_config, log_step_count_steps=100,
                                    save_checkpoints_steps=100000, save_summary_steps=100000)
    fc = tf.feature_column
    sgd = lambda: tf.keras.optimizers.legacy.SGD(0.05)  # noqa: E731
    dnn_opt = sgd if a.optimizer == "sgd" else "Adagrad"
    lin_opt = sgd if a.optimizer == "sgd" else "Ftrl"
    if a.model == "dnn":
        cols = [fc.numeric_column("image", shape=(784,))]
        est = tf.estimator.DNNClassifier(hidden_units=[512, 256], feature_columns=cols, n_classes=10,
                                         optimizer=dnn_opt, config=config)
    elif a.model == "sparse":
        idc = fc.categorical_column_with_identity("id", 100000)
        cols = [fc.numeric_column("x", shape=(16,)), fc.embedding_column(idc, 4)]
        est = tf.estimator.DNNClassifier(hidden_units=[64], feature_columns=cols, n_classes=4, optimizer=dnn_opt,
                                         config=config)
    else:
        idc = fc.categorical_column_with_identity("id", 100000)
        xc = fc.numeric_column("x", shape=(16,))
        cross = fc.crossed_column([idc, fc.bucketized_column(xc, [-0.25, 0.0, 0.25])], 100000)
        est = tf.estimator.DNNLinearCombinedClassifier(
            linear_feature_columns=[idc, cross], linear_optimizer=lin_opt, dnn_feature_columns=[xc, fc.embedding_column(idc, 8)],
            dnn_optimizer=dnn_opt, dnn_hidden_units=[64], n_classes=4, config=config)
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
