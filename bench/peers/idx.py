"""IDX files (Fashion-MNIST's format, gzip-compressed as Debian ships them), and what the multi-process
peers (torch_ddp_mlp.py, tf_mwms_mlp.py) share: their data shard, the wait-and-report of a job, and
their flags and the reading of a rank from TF_CONFIG when another launcher starts them (--tf_config)."""
import gzip
import os


def read_idx(path):
    """The array an IDX file holds (uint8 data; the dimensions from its header, big-endian). numpy is
    imported here, not at load, so that a peer script can report a missing framework first."""
    import numpy as np
    with gzip.open(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


def read_fashion_shard(data, rank, nproc):
    """Rank `rank` of `nproc`'s share (every nproc-th example) of Fashion-MNIST's training set in the
    directory `data`: images as float32 in [0, 1], shape (n, 784), and the uint8 labels."""
    import numpy as np
    x = read_idx(os.path.join(data, "train-images-idx3-ubyte.gz")).reshape(-1, 784)[rank::nproc]
    y = read_idx(os.path.join(data, "train-labels-idx1-ubyte.gz"))[rank::nproc]
    return x.astype(np.float32) / 255.0, y


def lo_tx():
    """Bytes sent on the loopback interface so far (/proc/net/dev), 0 where it is not listed."""
    with open("/proc/net/dev") as f:
        for line in f:
            if line.strip().startswith("lo:"):
                return int(line.split(":", 1)[1].split()[8])
    return 0


def finish_job(impl, procs, timeout, b0, idle, steps_total, nproc):
    """Wait for a launched job (procs[0] piped, the others not), pass rank 0's output on and print the
    loopback bytes per step per worker; the exit code the launcher returns."""
    import subprocess
    import sys
    try:
        out, _ = procs[0].communicate(timeout=timeout)
        rcs = [procs[0].returncode] + [p.wait(timeout=timeout) for p in procs[1:]]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        print("impl=%s\nerror=timeout after %.0f s" % (impl, timeout))
        return 1
    b1 = lo_tx()
    sys.stdout.write(out)
    if any(rcs):
        print("error=worker exit codes %s" % rcs)
        return 1
    print("lo_bytes_per_step_per_worker=%.0f" % ((b1 - b0) / steps_total / nproc))
    print("lo_bytes_idle_per_s=%d" % idle)
    return 0


def tf_config_rank(text):
    """(rank, world size, "host:port" of rank 0) from a TF_CONFIG of chief/worker tasks."""
    import json
    if not text:
        raise ValueError("TF_CONFIG is not set")
    try:
        tc = json.loads(text)
        cluster, task = tc["cluster"], tc["task"]
        ttype, tindex = task["type"], int(task["index"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError("TF_CONFIG is not a cluster and a task: %s" % e)
    extra = sorted(k for k in cluster if k not in ("chief", "worker"))
    if extra:
        raise ValueError("TF_CONFIG's cluster has job(s) %s: an all-reduce job has chief and worker tasks only" % extra)
    trainers = [("chief", i) for i in range(len(cluster.get("chief", [])))] + \
               [("worker", i) for i in range(len(cluster.get("worker", [])))]
    if not trainers:
        raise ValueError("TF_CONFIG's cluster has no chief or worker task")
    if (ttype, tindex) not in trainers:
        raise ValueError("TF_CONFIG's task %s:%d is not one of the cluster's trainers %s" % (ttype, tindex, trainers))
    t0, i0 = trainers[0]
    return trainers.index((ttype, tindex)), len(trainers), cluster[t0][i0]


def peer_flags(description, argv, extra=None, min_warmup=1):
    """The peers' shared flags (nproc, steps, warmup, opt, lr, batch, threads, data, timeout, check,
    tf_config), extra(parser) adding a peer's own; with --tf_config, rank, nproc and master (rank 0's
    address) from TF_CONFIG."""
    import argparse
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--opt", default="sgd", choices=["sgd", "adagrad"])
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--check", action="store_true", help="parse the flags, print them and exit")
    ap.add_argument("--tf_config", action="store_true", help="one task; the job from TF_CONFIG")
    ap.add_argument("--model_dir", default="", help=argparse.SUPPRESS)  # appended by launchers; unused
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)  # one rank of the job (internal)
    if extra:
        extra(ap)
    a = ap.parse_args(argv)
    if a.nproc < 1 or a.steps < 1 or a.warmup < min_warmup or a.batch < 1 or a.threads < 1:
        ap.error("--nproc, --steps, --batch and --threads must be >= 1 and --warmup >= %d" % min_warmup)
    a.master = None
    if a.tf_config:
        try:
            a.rank, a.nproc, a.master = tf_config_rank(os.environ.get("TF_CONFIG", ""))
        except ValueError as e:
            ap.error("--tf_config: %s" % e)
    return a
