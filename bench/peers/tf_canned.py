#!/usr/bin/env python3
"""TF 2.15 peer of bench/canned.c: TF's own canned estimators (tensorflow-
estimator 2.15) on the same recipes (data, split, columns, optimizer, batch,
steps), one thread (intra/inter op 1; run it with TF_NUM_INTRAOP_THREADS=
TF_NUM_INTEROP_THREADS=1), train + evaluate + export; --threads 0: TF's
default threading (nothing set; run without those variables).
    python tf_canned.py --model iris_dnn|fmnist_dnn|fmnist_linear|diamonds_linear|
                        diamonds_dnn|diamonds_wd|insteval_wd --model_dir DIR
                        [--epochs 5] [--steps N] [--threads 1] [--iris PATH] [--fashion DIR] [--data DIR]
                        [--shuffle 0] [--init_from LOOM_CHECKPOINT]
--shuffle 0 trains in file order (bench/canned.c --shuffle 0 makes the same
batches); --init_from starts from a loom run's initial values (its
model.ckpt-0): with both, TF and loom train from the same weights on the
same batches, so any difference is the implementation's.
Input is fed as efficiently as TF allows: in-memory arrays (uint8 images)
through from_tensor_slices -> cache -> shuffle -> repeat -> batch ->
(vectorised map) -> prefetch.  steps_per_sec is timed like loom's (an
after_run hook, the steps after the first 10%; steps_per_cpu_sec: over the
process's CPU time, all threads); tf_logged_global_step_per_sec
is the median of TF's own 'global_step/sec' log lines.  Prints key=value."""
import argparse
import csv
import logging
import math
import os
import resource
import statistics
import time

T_START = time.perf_counter()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from idx import read_idx  # noqa: E402  (bench/peers/idx.py)
from loom_ckpt import read_loom_checkpoint  # noqa: E402  (bench/peers/loom_ckpt.py)

fc = tf.feature_column
AUTOTUNE = tf.data.AUTOTUNE
IRIS_F = ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth"]
DIA_NUM = ["carat", "depth", "table", "x", "y", "z"]
CUT = ["Fair", "Good", "Very Good", "Premium", "Ideal"]
COLOR = ["D", "E", "F", "G", "H", "I", "J"]
CLARITY = ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"]
DEPT = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "14", "15"]
SERVICE = ["0", "1"]
STUDAGE = ["2", "4", "6", "8"]
LECTAGE = ["1", "2", "3", "4", "5", "6"]


def perm(n, seed):
    """The LCG Fisher-Yates permutation of bench/canned.c (uint32 arithmetic)."""
    p = list(range(n))
    s = seed
    for i in range(n - 1, 0, -1):
        s = (s * 1664525 + 1013904223) & 0xFFFFFFFF
        j = (s >> 8) % (i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[1:]


def split(rows, p, ntr):
    return [rows[i] for i in p[:ntr]], [rows[i] for i in p[ntr:]]


def load_iris(path):
    rows = read_csv(path)
    tr, te = split(rows, perm(150, 12345), 120)

    def arrays(part):
        x = {k: np.array([float(r[i]) for r in part], np.float32) for i, k in enumerate(IRIS_F)}
        return x, np.array([int(r[4]) for r in part], np.int64)
    return arrays(tr), arrays(te)


def load_diamonds(path):
    rows = read_csv(path)
    ntr = len(rows) * 4 // 5
    tr, te = split(rows, perm(len(rows), 777), ntr)
    cols = {"carat": 1, "depth": 5, "table": 6, "x": 8, "y": 9, "z": 10}

    def arrays(part):
        x = {k: np.array([float(r[c]) for r in part], np.float32) for k, c in cols.items()}
        for k, c in (("cut", 2), ("color", 3), ("clarity", 4)):
            x[k] = np.array([r[c] for r in part], object)
        return x, np.array([float(r[7]) / 1000.0 for r in part], np.float32)
    a, b = arrays(tr), arrays(te)
    moments = {}
    for k in DIA_NUM:  # moments of the training split, in float64 like loom's
        v = a[0][k].astype(np.float64)
        moments[k] = (v.mean(), math.sqrt(((v - v.mean()) ** 2).mean()))
    return a, b, moments


def load_insteval(path):
    rows = read_csv(path)
    ntr = len(rows) * 4 // 5
    tr, te = split(rows, perm(len(rows), 777), ntr)
    names = ["s", "d", "studage", "lectage", "service", "dept"]

    def arrays(part):
        x = {k: np.array([r[i + 1] for r in part], object) for i, k in enumerate(names)}
        return x, np.array([int(r[7]) - 1 for r in part], np.int64)
    return arrays(tr), arrays(te)


def tf_checkpoint_from_loom(path, out_dir):
    """The float tensors of a loom checkpoint, under the same names, saved as a
    TF checkpoint in out_dir (for WarmStartSettings); returns out_dir."""
    vals = {k: v for k, v in read_loom_checkpoint(path).items() if v.dtype == np.float32}
    os.makedirs(out_dir, exist_ok=True)
    with tf.Graph().as_default():
        vs = [tf.compat.v1.Variable(v, name=k) for k, v in vals.items()]
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            tf.compat.v1.train.Saver(vs).save(s, os.path.join(out_dir, "model.ckpt"))
    return out_dir


class Rate(tf.estimator.SessionRunHook):
    """Timestamps after each step: steady state = steps after the first warm."""

    def __init__(self, warm):
        self.n, self.warm, self.t0, self.t1, self.c0, self.c1 = 0, warm, 0.0, 0.0, 0.0, 0.0

    def after_run(self, run_context, run_values):
        t, c = time.perf_counter(), time.process_time()
        self.n += 1
        if self.n == self.warm:
            self.t0, self.c0 = t, c
        self.t1, self.c1 = t, c


class StepLog(logging.Handler):
    """Collects TF's own 'global_step/sec: X' log values."""

    def __init__(self):
        super().__init__()
        self.values = []

    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith("global_step/sec:"):
            self.values.append(float(msg.split(":")[1]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--model_dir", required=True)
    ap.add_argument("--epochs", type=float, default=5)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--shuffle", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--init_from", default=None,
                    help="a loom checkpoint (a bench/canned run's model.ckpt-0): the trainable variables start there")
    ap.add_argument("--threads", type=int, default=1,
                    help="intra/inter-op threads; 0 = TF's defaults (bench_canned.sh's default-threading table)")
    ap.add_argument("--iris", default="/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv")
    ap.add_argument("--fashion", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--data", default=os.path.expanduser("~/.cache/loom/data"))
    a = ap.parse_args()
    if a.threads > 0:
        tf.config.threading.set_intra_op_parallelism_threads(a.threads)
        tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    steplog = StepLog()
    for h in tf.get_logger().handlers:
        h.setLevel(logging.WARNING)  # keep stderr quiet; StepLog still sees INFO
    tf.get_logger().addHandler(steplog)

    session_config = (tf.compat.v1.ConfigProto(intra_op_parallelism_threads=a.threads,
                                               inter_op_parallelism_threads=a.threads) if a.threads > 0 else None)
    config = tf.estimator.RunConfig(model_dir=a.model_dir, tf_random_seed=a.seed, session_config=session_config,
                                    log_step_count_steps=100)
    if a.init_from:  # every trainable variable from the loom checkpoint (same names)
        ckpt = tf_checkpoint_from_loom(a.init_from, os.path.join(a.model_dir, "loom_init"))
        ws = tf.estimator.WarmStartSettings(ckpt, ".*")
        init = {"warm_start_from": ws}
    else:
        init = {}
    batch, eval_batch, shuffle_buf = 128, 1000, 10000
    m = a.model
    classifier = True
    if m == "iris_dnn":
        (xtr, ytr), (xte, yte) = load_iris(a.iris)
        batch, shuffle_buf = 32, 120
        steps = a.steps or 1000
        cols = [fc.numeric_column(k) for k in IRIS_F]
        est = tf.estimator.DNNClassifier(hidden_units=[10, 10], feature_columns=cols, n_classes=3,
                                         optimizer=lambda: tf.keras.optimizers.legacy.Adagrad(0.1),
                                         config=config, **init)
        serving = {k: (tf.float32, [None]) for k in IRIS_F}
    elif m.startswith("fmnist_"):
        xtr = read_idx(a.fashion + "/train-images-idx3-ubyte.gz").reshape(-1, 784)
        ytr = read_idx(a.fashion + "/train-labels-idx1-ubyte.gz").astype(np.int32)
        xte = read_idx(a.fashion + "/t10k-images-idx3-ubyte.gz").reshape(-1, 784)
        yte = read_idx(a.fashion + "/t10k-labels-idx1-ubyte.gz").astype(np.int32)
        xtr, xte = {"image": xtr}, {"image": xte}
        steps = a.steps or math.ceil(a.epochs * 60000 / batch)
        cols = [fc.numeric_column("image", shape=(784,))]
        if m == "fmnist_dnn":
            est = tf.estimator.DNNClassifier(hidden_units=[512, 256], feature_columns=cols, n_classes=10,
                                             optimizer=lambda: tf.keras.optimizers.legacy.SGD(0.1),
                                             config=config, **init)
        else:
            est = tf.estimator.LinearClassifier(feature_columns=cols, n_classes=10, config=config, **init)
        serving = {"image": (tf.float32, [None, 784])}
    elif m.startswith("diamonds_"):
        (xtr, ytr), (xte, yte), mom = load_diamonds(os.path.join(a.data, "ggplot2/diamonds.csv"))
        classifier = False
        steps = a.steps or math.ceil(a.epochs * len(ytr) / batch)
        num = [fc.numeric_column(k, normalizer_fn=lambda x, mu=mom[k][0], sd=mom[k][1]: (x - mu) / sd)
               for k in DIA_NUM]
        cut = fc.categorical_column_with_vocabulary_list("cut", CUT)
        color = fc.categorical_column_with_vocabulary_list("color", COLOR)
        clar = fc.categorical_column_with_vocabulary_list("clarity", CLARITY)
        cross = fc.crossed_column(["color", "clarity"], 100)
        wide = [cut, color, clar, cross]
        deep = num + [fc.indicator_column(c) for c in wide]
        if m == "diamonds_linear":
            est = tf.estimator.LinearRegressor(feature_columns=num + wide, config=config, **init)
        elif m == "diamonds_dnn":
            est = tf.estimator.DNNRegressor(hidden_units=[64, 32], feature_columns=deep, config=config, **init)
        else:
            est = tf.estimator.DNNLinearCombinedRegressor(
                linear_feature_columns=wide, linear_optimizer=lambda: tf.keras.optimizers.legacy.Ftrl(0.1),
                dnn_feature_columns=deep, dnn_optimizer=lambda: tf.keras.optimizers.legacy.Adagrad(0.05),
                dnn_hidden_units=[64, 32], config=config, **init)
        serving = {k: (tf.float32, [None]) for k in DIA_NUM}
        serving.update({k: (tf.string, [None]) for k in ("cut", "color", "clarity")})
    elif m == "insteval_wd":
        (xtr, ytr), (xte, yte) = load_insteval(os.path.join(a.data, "lme4/InstEval.csv"))
        steps = a.steps or math.ceil(a.epochs * len(ytr) / batch)
        s = fc.categorical_column_with_hash_bucket("s", 5000)
        d = fc.categorical_column_with_hash_bucket("d", 2000)
        service = fc.categorical_column_with_vocabulary_list("service", SERVICE)
        dept = fc.categorical_column_with_vocabulary_list("dept", DEPT)
        studage = fc.categorical_column_with_vocabulary_list("studage", STUDAGE)
        lectage = fc.categorical_column_with_vocabulary_list("lectage", LECTAGE)
        deep = [fc.embedding_column(s, 16), fc.embedding_column(d, 16)] + \
            [fc.indicator_column(c) for c in (service, dept, studage, lectage)]
        wide = [s, d, service, dept, fc.crossed_column(["s", "d"], 50000)]
        est = tf.estimator.DNNLinearCombinedClassifier(
            linear_feature_columns=wide, linear_optimizer=lambda: tf.keras.optimizers.legacy.Ftrl(0.1),
            dnn_feature_columns=deep, dnn_optimizer=lambda: tf.keras.optimizers.legacy.Adagrad(0.05),
            dnn_hidden_units=[64, 32], n_classes=5, config=config, **init)
        serving = {k: (tf.string, [None]) for k in ("s", "d", "studage", "lectage", "service", "dept")}
    else:
        raise SystemExit("tf_canned.py: unknown --model '%s'" % m)

    images = m.startswith("fmnist_")

    def to_features(x, y):
        if images:
            x = {"image": tf.cast(x["image"], tf.float32) / 255.0}
        return x, y

    def train_input():
        ds = tf.data.Dataset.from_tensor_slices((xtr, ytr)).cache()
        ds = (ds.shuffle(shuffle_buf, seed=7) if a.shuffle else ds).repeat()
        return ds.batch(batch).map(to_features).prefetch(AUTOTUNE)

    def eval_input():
        ds = tf.data.Dataset.from_tensor_slices((xte, yte)).cache().batch(eval_batch)
        return ds.map(to_features).prefetch(AUTOTUNE)

    def serving_input():
        f = {k: tf.compat.v1.placeholder(dt, shape, name=k) for k, (dt, shape) in serving.items()}
        return tf.estimator.export.ServingInputReceiver(f, f)

    rate = Rate(max(steps // 10, 1))
    tf.get_logger().setLevel(logging.INFO)  # (tensorflow_estimator lowers it on import)
    t0 = time.perf_counter()
    est.train(train_input, steps=steps, hooks=[rate])
    t1 = time.perf_counter()
    res = est.evaluate(eval_input)
    t2 = time.perf_counter()
    est.export_saved_model(os.path.join(a.model_dir, "export"), serving_input)
    t3 = time.perf_counter()
    out = ["impl=tf", "tf_version=" + tf.__version__, "model=" + m, "steps=%d" % steps, "batch=%d" % batch,
           "threads=%d" % a.threads, "steps_per_sec=%.1f" % ((rate.n - rate.warm) / (rate.t1 - rate.t0)),
           "steps_per_cpu_sec=%.1f" % ((rate.n - rate.warm) / (rate.c1 - rate.c0))]
    if steplog.values:
        out.append("tf_logged_global_step_per_sec=%.1f" % statistics.median(steplog.values))
    out += ["train_sec=%.3f" % (t1 - t0), "eval_sec=%.3f" % (t2 - t1), "export_sec=%.3f" % (t3 - t2),
            "average_loss=%.5f" % res["average_loss"]]
    if classifier:
        out.append("accuracy=%.5f" % res["accuracy"])
    else:
        out.append("rmse=%.5f" % (math.sqrt(res["average_loss"]) * 1000.0))
    out.append("peak_rss_mb=%.1f" % (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0))
    out.append("job_sec=%.3f" % (time.perf_counter() - T_START))
    print("\n".join(out))


if __name__ == "__main__":
    main()
