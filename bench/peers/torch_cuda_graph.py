#!/usr/bin/env python3
"""PyTorch peer with the whole training step captured as one CUDA graph, beside loom's
captured steps (engine/backend.c loom__dev_run_graph) in scripts/bench_gpu.sh.

--model mlp: the 784-512-256-10 MLP of bench/mlp_train / bench/peers/torch_mlp.py;
--model cnn: the CNN of bench/cnn_train / bench/peers/torch_cnn.py (Adam 1e-3).
The step (forward, loss, backward, optimizer update) is captured once with torch.cuda.graph after
warm-up steps on a side stream, the way PyTorch documents whole-network capture: inputs and labels
live in static device tensors, each step copies the next batch into them (from pinned host memory,
asynchronously) and replays the graph; Adam runs with capturable=True. step_us is the median over
steps of (copy batch in + replay + synchronize), as torch_mlp.py times its eager steps. Prints the
same keys as the other peers; skipped=1 without torch or without a GPU."""
import argparse, os, resource, sys, time
from idx import read_idx  # noqa: E402  (bench/peers/idx.py)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    ap.add_argument("--opt", default=None, help="sgd or adam (default: sgd for mlp, adam for cnn)")
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=None, help="default: 128 (mlp), 64 (cnn)")
    ap.add_argument("--fp32", type=int, default=1, help="1: no TF32 (FP32 like loom's default)")
    ap.add_argument("--warmup", type=int, default=11)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    try:
        import torch, numpy as np
        from torch import nn
    except ImportError:
        print("impl=torch_graph\nskipped=1\nreason=torch not installed")
        return 0
    if not torch.cuda.is_available():
        print("impl=torch_graph\nskipped=1\nreason=no CUDA device")
        return 0
    torch.manual_seed(a.seed)
    dev = torch.device("cuda")
    if a.fp32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    opt_name = a.opt or ("sgd" if a.model == "mlp" else "adam")
    lr = a.lr if a.lr is not None else (1e-3 if opt_name == "adam" else 0.1)
    B = a.batch or (128 if a.model == "mlp" else 64)
    shape = (-1, 784) if a.model == "mlp" else (-1, 1, 28, 28)
    tx = torch.from_numpy(read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz")).reshape(shape).copy())
    ty = torch.from_numpy(read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz")).astype("int64"))
    vx = torch.from_numpy(read_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")).reshape(shape).copy())
    vy = torch.from_numpy(read_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz")).astype("int64"))
    if a.model == "mlp":
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))
    else:
        model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10))
    model = model.to(dev)
    if opt_name == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=lr, capturable=True)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    lossf = nn.CrossEntropyLoss()
    spe = tx.shape[0] // B
    total = a.steps if a.steps > 0 else spe * a.epochs
    g = torch.Generator().manual_seed(a.seed)
    perm = torch.randperm(tx.shape[0], generator=g)
    # static device inputs and pinned host staging (the batch gathered on the host, as the eager peers do)
    sx = torch.zeros((B,) + tuple(tx.shape[1:]), dtype=torch.uint8, device=dev)
    sy = torch.zeros(B, dtype=torch.int64, device=dev)
    hx = torch.empty(sx.shape, dtype=torch.uint8).pin_memory()
    hy = torch.empty(B, dtype=torch.int64).pin_memory()

    def stage(k, p):
        idx = p[k * B:(k + 1) * B]
        torch.index_select(tx, 0, idx, out=hx)
        torch.index_select(ty, 0, idx, out=hy)
        sx.copy_(hx, non_blocking=True)
        sy.copy_(hy, non_blocking=True)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = lossf(model(sx.float().div(255.0)), sy)
        loss.backward()
        opt.step()
        return loss

    # warm-up on a side stream (PyTorch's documented requirement before capture)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for w in range(a.warmup):
            stage(w % spe, perm)
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=False)
    with torch.cuda.graph(graph):
        static_loss = step()
    times = []
    for s in range(total):
        k = s % spe
        if k == 0 and s > 0:
            perm = torch.randperm(tx.shape[0], generator=g)
        t0 = time.perf_counter()
        stage(k, perm)
        graph.replay()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    with torch.no_grad():
        pred = model(vx.to(dev).float() / 255.0).argmax(1).cpu()
    acc = (pred == vy).float().mean().item()
    times.sort()
    med = times[len(times) // 2] * 1e6
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"impl=torch_graph\ntorch_version={torch.__version__}\nmodel={a.model}\nopt={opt_name}\nbatch={B}\nsteps={total}")
    print(f"final_loss={static_loss.item():.4f}\nstep_us={med:.1f}\nsteps_per_sec={1e6 / med:.1f}\ntest_accuracy={acc:.4f}")
    print(f"peak_rss_mb={rss:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
