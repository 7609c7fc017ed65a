#!/usr/bin/env python3
"""PyTorch DDP peer of bench/scaling --collective: the Fashion-MNIST MLP 784-512-256-10, batch 128 per
process, one thread per process, trained synchronously by DistributedDataParallel with the Gloo backend
on CPU, N processes on loopback (this script starts them, as torchrun would: a fresh interpreter per
rank, rendezvous over TCP at 127.0.0.1 on a free port).

    torch_ddp_mlp.py --nproc N [--steps 300] [--warmup 20] [--opt sgd|adagrad] [--lr 0.05]
                     [--batch 128] [--threads 1] [--data DIR] [--bucket_mb 25]
    TF_CONFIG=... torch_ddp_mlp.py --tf_config [flags as above but --nproc] [--model_dir IGNORED]

--tf_config: this process is one rank of a job another launcher started, one process per task
(bench/netjob --collective: each rank in its own network namespace). The rank and world size come
from TF_CONFIG as loom's collective strategy reads it (the chief is rank 0, then the workers by
index; a cluster of workers alone: worker 0 is rank 0); the rendezvous is torch's TCP store at
rank 0's TF_CONFIG address. Gloo's interface is GLOO_SOCKET_IFNAME when set (netjob sets it to
the namespace's link). A ps or evaluator task in TF_CONFIG is an error naming it. With --check it
prints the rank, the world size and the rendezvous address it derived.

Each rank reads its own shard of the training set (every N-th example from its rank), converted to
float32 once before training, and draws batches from a per-epoch permutation. The first --warmup steps
are not timed; then every rank waits at a barrier and rank 0 times --steps steps (each one all-reduces
the gradients, so rank 0's rate is the job's). Prints key=value lines (the launcher adds the bytes):
  impl=torch_ddp torch_version= nproc= steps= warmup= opt= threads= cores=
  global_steps_per_sec        synchronous steps per second (each one N x batch examples)
  examples_per_sec            global_steps_per_sec x N x batch
  gradient_bytes              the gradient bytes all-reduced per step (float32 parameters)
  lo_bytes_per_step_per_worker  bytes sent on the loopback interface during the whole run (rendezvous,
                              warm-up and the final barrier included) / (steps + warmup) / N; the
                              machine's other loopback traffic counts too (lo_bytes_idle_per_s says how much)
  final_loss                  rank 0's loss at the last step
Exits 0 with skipped=1 when torch is not installed. --check only parses the flags and prints them."""
import argparse
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from idx import finish_job, lo_tx, peer_flags, read_fashion_shard  # noqa: E402  (bench/peers/idx.py)


def _ddp_flags(ap):
    ap.add_argument("--bucket_mb", type=float, default=25.0)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)  # rank 0's port (internal)


def flags(argv=None):
    return peer_flags("PyTorch DDP (Gloo, CPU) Fashion-MNIST MLP peer", argv, _ddp_flags, min_warmup=0)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def launch(a):
    import importlib.util
    if importlib.util.find_spec("torch") is None:  # found without importing it
        print("impl=torch_ddp\nskipped=1\nreason=torch not installed")
        return 0
    i0 = lo_tx()
    time.sleep(1.0)
    idle = lo_tx() - i0
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads))
    base = [sys.executable, os.path.abspath(__file__), "--nproc", str(a.nproc), "--steps", str(a.steps),
            "--warmup", str(a.warmup), "--opt", a.opt, "--lr", str(a.lr), "--batch", str(a.batch),
            "--threads", str(a.threads), "--bucket_mb", str(a.bucket_mb), "--data", a.data, "--port", str(port)]
    b0 = lo_tx()
    procs = [subprocess.Popen(base + ["--rank", str(r)], env=env, stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL,
                              text=True) for r in range(a.nproc)]
    return finish_job("torch_ddp", procs, a.timeout, b0, idle, a.steps + a.warmup, a.nproc)


def rank_main(a):
    import numpy as np
    import torch
    import torch.distributed as dist
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    master = a.master if a.tf_config else "127.0.0.1:%d" % a.port
    dist.init_process_group("gloo", init_method="tcp://" + master, rank=a.rank, world_size=a.nproc)
    x, y = read_fashion_shard(a.data, a.rank, a.nproc)
    tx = torch.from_numpy(x)
    ty = torch.from_numpy(y.astype(np.int64))
    net = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                              torch.nn.ReLU(), torch.nn.Linear(256, 10))
    model = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=a.bucket_mb)
    if a.opt == "adagrad":
        opt = torch.optim.Adagrad(model.parameters(), lr=a.lr, initial_accumulator_value=0.1)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    lossf = torch.nn.CrossEntropyLoss()
    B = a.batch
    spe = tx.shape[0] // B
    g = torch.Generator().manual_seed(1 + a.rank)
    perm = None
    t0 = 0.0
    loss = None
    for s in range(a.warmup + a.steps):
        if s == a.warmup:
            dist.barrier()
            t0 = time.perf_counter()
        k = s % spe
        if k == 0:
            perm = torch.randperm(tx.shape[0], generator=g)
        idx = perm[k * B:(k + 1) * B]
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(tx[idx]), ty[idx])
        loss.backward()
        opt.step()
    t1 = time.perf_counter()
    dist.barrier()
    if a.rank == 0:
        gps = a.steps / (t1 - t0)
        gb = sum(p.numel() * p.element_size() for p in net.parameters())
        print("impl=torch_ddp\ntorch_version=%s\nnproc=%d\nsteps=%d\nwarmup=%d\nopt=%s\nthreads=%d\ncores=%d" % (
            torch.__version__, a.nproc, a.steps, a.warmup, a.opt, a.threads, os.cpu_count()))
        print("global_steps_per_sec=%.2f\nexamples_per_sec=%.0f\ngradient_bytes=%d\nfinal_loss=%.4f" % (
            gps, gps * a.nproc * B, gb, loss.item()))
        sys.stdout.flush()
    dist.destroy_process_group()
    return 0


def main():
    a = flags()
    if a.check:
        skip = ("check", "port", "model_dir") + (() if a.tf_config else ("rank",))
        print(" ".join("%s=%s" % (k, v) for k, v in sorted(vars(a).items()) if k not in skip))
        return 0
    if a.tf_config:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(a.threads)  # before torch loads
        return rank_main(a)
    return rank_main(a) if a.rank >= 0 else launch(a)


if __name__ == "__main__":
    sys.exit(main())
