#!/usr/bin/env python3
"""PyTorch peer for bench/mlp_train: same MLP recipe, flags and output keys.
Skips cleanly (prints skipped=1) when torch is not installed."""
import argparse, os, resource, sys, time
from idx import read_idx  # noqa: E402  (bench/peers/idx.py)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opt", default="sgd")
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--fp32", type=int, default=0, help="1: no TF32 on the GPU (PyTorch lets convolutions use it by default)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    try:
        import torch, numpy as np
    except ImportError:
        print("impl=torch\nskipped=1\nreason=torch not installed")
        return 0
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device("cuda" if a.device == "cuda" and torch.cuda.is_available() else "cpu")
    if a.fp32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    lr = a.lr if a.lr is not None else (1e-3 if a.opt == "adam" else 0.1)
    tx = torch.from_numpy(read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz")).reshape(-1, 784).copy())
    ty = torch.from_numpy(read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz")).astype("int64"))
    vx = torch.from_numpy(read_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784).copy())
    vy = torch.from_numpy(read_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz")).astype("int64"))
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr) if a.opt == "adam" else torch.optim.SGD(model.parameters(), lr=lr)
    lossf = torch.nn.CrossEntropyLoss()
    B = a.batch
    spe = tx.shape[0] // B
    total = a.steps if a.steps > 0 else spe * a.epochs
    g = torch.Generator().manual_seed(a.seed)
    times = []
    perm = None
    for s in range(total):
        k = s % spe
        if k == 0:
            perm = torch.randperm(tx.shape[0], generator=g)
        t0 = time.perf_counter()
        idx = perm[k * B:(k + 1) * B]
        xb = tx[idx].to(dev).float().div_(255.0)
        yb = ty[idx].to(dev)
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(xb), yb)
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    with torch.no_grad():
        pred = model(vx.to(dev).float() / 255.0).argmax(1).cpu()
    acc = (pred == vy).float().mean().item()
    times.sort()
    med = times[len(times) // 2] * 1e6
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"impl=torch\ntorch_version={torch.__version__}\nopt={a.opt}\nthreads={a.threads}\nsteps={total}")
    print(f"final_loss={loss.item():.4f}\nstep_us={med:.1f}\nsteps_per_sec={1e6 / med:.1f}\ntest_accuracy={acc:.4f}")
    print(f"peak_rss_mb={rss:.1f}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
