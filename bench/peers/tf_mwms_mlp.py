#!/usr/bin/env python3
"""TF 2.15 peer of bench/scaling --collective: the Fashion-MNIST MLP 784-512-256-10, batch 128 per
worker, one thread per process (intra- and inter-op), trained synchronously by Keras Model.fit under
tf.distribute.MultiWorkerMirroredStrategy (TF's CPU collectives: ring all-reduce over gRPC), N worker
processes on loopback. This script starts them, each with its own TF_CONFIG (a cluster of N `worker`
tasks on free ports of 127.0.0.1, as Kubeflow's TFJob would set it).

    tf_mwms_mlp.py --nproc N [--steps 300] [--warmup 20] [--opt sgd|adagrad] [--lr 0.05]
                   [--batch 128] [--threads 1] [--data DIR]

Each worker reads its own shard of the training set (every N-th example from its index; the
dataset's auto-sharding off), shuffled, batched at the global batch N x 128 which the strategy
splits into 128 per worker. A Keras callback on worker 0 times the steps after the first --warmup
(each step all-reduces the gradients, so worker 0's rate is the job's). Prints key=value lines:
  impl=tf_mwms tf_version= nproc= steps= warmup= opt= threads= cores=
  global_steps_per_sec, examples_per_sec, gradient_bytes, final_loss (the workers' mean),
  lo_bytes_per_step_per_worker, lo_bytes_idle_per_s   (as bench/peers/torch_ddp_mlp.py)
--check only parses the flags and prints them.

    TF_CONFIG=... tf_mwms_mlp.py --tf_config [flags as above but --nproc] [--model_dir IGNORED]

--tf_config: this process is one task of a job another launcher started, one process per task with
its own TF_CONFIG (bench/netjob --collective --task-port 2222: each task in its own network namespace;
every task's address needs a fixed port, gRPC's). The shard index and the worker count follow the
cluster's chief and worker tasks (the chief first, as TF's strategy orders them); the first task
prints the figures. A ps or evaluator task is an error naming it."""
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from idx import finish_job, lo_tx, peer_flags, read_fashion_shard  # noqa: E402  (bench/peers/idx.py)


def flags(argv=None):
    return peer_flags("TF 2.15 MultiWorkerMirroredStrategy Fashion-MNIST MLP peer", argv)


def launch(a):
    i0 = lo_tx()
    time.sleep(1.0)
    idle = lo_tx() - i0
    socks = [socket.socket() for _ in range(a.nproc)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    workers = ["127.0.0.1:%d" % s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    b0 = lo_tx()
    procs = []
    for i in range(a.nproc):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS=str(a.threads),
                   TF_CONFIG=json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}}))
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"] + sys.argv[1:], env=env,
                                      stdout=subprocess.PIPE if i == 0 else subprocess.DEVNULL,
                                      stderr=None if i == 0 else subprocess.DEVNULL, text=True))
    return finish_job("tf_mwms", procs, a.timeout, b0, idle, a.steps + a.warmup, a.nproc)


def worker_main(a):
    import numpy as np
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task = a.rank if a.tf_config else json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    x, y = read_fashion_shard(a.data, task, a.nproc)
    y = y.astype(np.int32)
    opts = tf.data.Options()
    opts.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(10000, seed=1 + task).repeat()
          .batch(a.batch * a.nproc, drop_remainder=True).prefetch(2).with_options(opts))
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(512, activation="relu", input_shape=(784,)),
                                     tf.keras.layers.Dense(256, activation="relu"), tf.keras.layers.Dense(10)])
        if a.opt == "adagrad":
            opt = tf.keras.optimizers.Adagrad(a.lr, initial_accumulator_value=0.1)
        else:
            opt = tf.keras.optimizers.SGD(a.lr)
        model.compile(optimizer=opt, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    class Rate(tf.keras.callbacks.Callback):
        t0 = t1 = 0.0
        loss = 0.0

        def on_train_batch_end(self, batch, logs=None):
            if batch == a.warmup - 1:
                self.t0 = time.perf_counter()
            elif batch == a.warmup + a.steps - 1:
                self.t1 = time.perf_counter()
                # Keras 2.15 under this strategy logs the sum of the workers' mean losses (it grows as N x
                # the one-worker loss at the same step); the mean over the workers is printed
                self.loss = float((logs or {}).get("loss", 0.0)) / a.nproc

    r = Rate()
    model.fit(ds, epochs=1, steps_per_epoch=a.warmup + a.steps, callbacks=[r], verbose=0)
    if task == 0:
        gps = a.steps / (r.t1 - r.t0)
        gb = sum(int(np.prod(v.shape)) * 4 for v in model.trainable_variables)
        print("impl=tf_mwms\ntf_version=%s\nnproc=%d\nsteps=%d\nwarmup=%d\nopt=%s\nthreads=%d\ncores=%d" % (
            tf.__version__, a.nproc, a.steps, a.warmup, a.opt, a.threads, os.cpu_count()))
        print("global_steps_per_sec=%.2f\nexamples_per_sec=%.0f\ngradient_bytes=%d\nfinal_loss=%.4f" % (
            gps, gps * a.nproc * a.batch, gb, r.loss))
        sys.stdout.flush()
    return 0


def main():
    worker = "--worker" in sys.argv[1:]
    if worker:
        sys.argv.remove("--worker")
    a = flags()
    if a.check:
        skip = ("check", "model_dir") + (() if a.tf_config else ("rank",))
        print(" ".join("%s=%s" % (k, v) for k, v in sorted(vars(a).items()) if k not in skip))
        return 0
    if worker:
        return worker_main(a)
    if a.tf_config:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        os.environ["OMP_NUM_THREADS"] = str(a.threads)
        return worker_main(a)
    import importlib.util
    if importlib.util.find_spec("tensorflow") is None:  # found without importing it (seconds of CPU)
        print("impl=tf_mwms\nskipped=1\nreason=tensorflow not installed")
        return 0
    return launch(a)


if __name__ == "__main__":
    sys.exit(main())
