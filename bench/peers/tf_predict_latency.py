#!/usr/bin/env python3
"""TensorFlow peer for bench/predict_latency: the same MLP 784-512-256-10
(ReLU, softmax probabilities, random weights) saved as a SavedModel, loaded
with tf.saved_model.load, and its serving_default signature called with one
example at a time. Prints key=value lines (batch1_p50_us, batch1_p99_us).
Skips cleanly (prints skipped=1) when TensorFlow is not installed.
  --threads N (1)  intra-op threads;  --runs N (3000)  timed calls"""
import argparse, os, shutil, sys, tempfile, time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3000)
    a = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import numpy as np
        import tensorflow as tf
    except ImportError:
        print("impl=tf_saved_model\nskipped=1\nreason=tensorflow not installed")
        return 0
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rng = np.random.default_rng(1)
    dims = [784, 512, 256, 10]

    class MLP(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = [tf.Variable(rng.uniform(-1, 1, (i, o)).astype("float32") / np.sqrt(i)) for i, o in zip(dims, dims[1:])]
            self.b = [tf.Variable(rng.uniform(-0.1, 0.1, (o,)).astype("float32")) for o in dims[1:]]

        @tf.function(input_signature=[tf.TensorSpec([None, 784], tf.float32, name="x")])
        def serve(self, x):
            h = x
            for i in range(3):
                h = tf.matmul(h, self.w[i]) + self.b[i]
                if i < 2:
                    h = tf.nn.relu(h)
            return {"probabilities": tf.nn.softmax(h)}

    d = tempfile.mkdtemp(prefix="tf_predict_latency_")
    try:
        m = MLP()
        tf.saved_model.save(m, d, signatures={"serving_default": m.serve})
        f = tf.saved_model.load(d).signatures["serving_default"]
        x = tf.constant(rng.uniform(0, 1, (1, 784)).astype("float32"))
        for _ in range(200):
            f(x=x)
        t = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            f(x=x)["probabilities"].numpy()
            t.append((time.perf_counter() - t0) * 1e6)
        t.sort()
        p50, p99 = t[len(t) // 2], t[int(0.99 * (len(t) - 1))]
        print(f"impl=tf_saved_model\ntf_version={tf.__version__}\nthreads={a.threads}\nruns={a.runs}")
        print(f"batch1_p50_us={p50:.2f}\nbatch1_p99_us={p99:.2f}")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
