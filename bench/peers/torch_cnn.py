#!/usr/bin/env python3
"""PyTorch peer for bench/cnn_train: same CNN recipe, flags and output keys.
conv(32,3x3,valid)-relu-maxpool2 -> conv(64,3x3,valid)-relu-maxpool2 -> flatten
-> dense 128 relu -> dense 10; Adam 1e-3, batch 64, mean cross-entropy.
Skips cleanly (prints skipped=1) when torch is not installed."""
import argparse, os, resource, sys, time
from idx import read_idx  # noqa: E402  (bench/peers/idx.py)


B = 64
EB = 200  # evaluation batch, as bench/cnn_train.c

def step_flops():
    c1 = 2.0 * B * 26 * 26 * 32 * 3 * 3 * 1
    c2 = 2.0 * B * 11 * 11 * 64 * 3 * 3 * 32
    d1, d2 = 2.0 * B * 1600 * 128, 2.0 * B * 128 * 10
    return 2 * c1 + 3 * c2 + 3 * d1 + 3 * d2

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--eval", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--fp32", type=int, default=0, help="1: no TF32 on the GPU (PyTorch lets convolutions use it by default)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    global B
    B = a.batch
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
    tx = torch.from_numpy(read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz")).reshape(-1, 1, 28, 28).copy())
    ty = torch.from_numpy(read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz")).astype("int64"))
    vx = torch.from_numpy(read_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")).reshape(-1, 1, 28, 28).copy())
    vy = torch.from_numpy(read_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz")).astype("int64"))
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(1600, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    lossf = nn.CrossEntropyLoss()
    spe = tx.shape[0] // B
    total = a.steps if a.steps > 0 else spe * a.epochs
    g = torch.Generator().manual_seed(a.seed)
    times = []
    perm = None
    loss = None
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
    acc = float("nan")
    if a.eval:
        correct = 0
        with torch.no_grad():
            for s0 in range(0, vx.shape[0] - EB + 1, EB):
                pred = model(vx[s0:s0 + EB].to(dev).float() / 255.0).argmax(1).cpu()
                correct += (pred == vy[s0:s0 + EB]).sum().item()
        acc = correct / (vx.shape[0] // EB * EB)
    times.sort()
    med = times[len(times) // 2] * 1e6
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(f"impl=torch\ntorch_version={torch.__version__}\nmodel=cnn\nthreads={a.threads}\nbatch={B}\nsteps={total}")
    print(f"final_loss={loss.item():.4f}\nstep_us={med:.1f}\nsteps_per_sec={1e6 / med:.1f}\ntest_accuracy={acc:.4f}")
    print(f"gflops={step_flops() / (med * 1e3):.2f}\npeak_rss_mb={rss:.1f}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
