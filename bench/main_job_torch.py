#!/usr/bin/env python3
"""grove's main job (examples/train_mlp with its defaults) next to the same training in PyTorch,
in one run: the [784, 512, 512, 10] swish MLP on Fashion-MNIST, pixels standardized with the
training set's mean and standard deviation, batches of 128 from a fresh permutation every epoch
(the last one takes the rest), adam (lr 1e-3, b1 0.9, b2 0.999, eps 1e-8) with the learning rate
decayed by 0.9 per epoch at every step (optax.exponential_decay, not staircase), softmax
cross-entropy, and after every epoch the test set's loss and accuracy. Each framework's figure is
the sum of its epochs' times (training and evaluation, as train_mlp's own epoch times; data
loading excluded). The two initialise and shuffle with their own random numbers, so their
accuracies agree only roughly; the work per epoch is the same.

    /usr/bin/python3 bench/main_job_torch.py --train-mlp build/main/examples/train_mlp

PyTorch runs in a child process per thread setting (torch threads x OpenBLAS threads, given as
--settings, e.g. 1x2); the fastest counts. grove's train_mlp runs with its defaults (all cores).
Rounds alternate grove and PyTorch. Needs Debian's python3-torch (with libopenblas0-pthread) and
dataset-fashion-mnist. Unsets OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for what it runs.
"""
import argparse
import csv
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402  (this directory's module, after the path)

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def child(data, epochs, threads):
    import time
    import numpy as np
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    load = lambda name: read_idx(os.path.join(data, name))  # noqa: E731
    train_x = load("train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255
    test_x = load("t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255
    mean, sd = float(train_x.mean(dtype=np.float64)), float(train_x.std(dtype=np.float64))
    train_x, test_x = (torch.from_numpy((a - mean) / sd) for a in (train_x, test_x))
    train_y = torch.from_numpy(load("train-labels-idx1-ubyte.gz").astype(np.int64))
    test_y = torch.from_numpy(load("t10k-labels-idx1-ubyte.gz").astype(np.int64))

    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.SiLU(),
                                torch.nn.Linear(512, 512), torch.nn.SiLU(),
                                torch.nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    n, batch = train_x.shape[0], 128
    steps = (n + batch - 1) // batch
    decay = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.9 ** (step / steps))
    loss_fn = torch.nn.functional.cross_entropy
    seconds, accuracy = [], 0.0
    for _ in range(epochs):
        t0 = time.perf_counter()
        perm = torch.randperm(n)
        for s in range(steps):
            idx = perm[s * batch:(s + 1) * batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step()
            decay.step()
        with torch.no_grad():
            logits = model(test_x)
            loss_fn(logits, test_y).item()
            accuracy = (logits.argmax(1) == test_y).double().mean().item()
        seconds.append(time.perf_counter() - t0)
    print(json.dumps({"seconds": sum(seconds), "accuracy": accuracy}))


def torch_run(data, epochs, torch_threads, blas_threads):
    env = {k: v for k, v in os.environ.items() if k not in cp.UNSET}
    env.update(OMP_NUM_THREADS=str(torch_threads), OPENBLAS_NUM_THREADS=str(blas_threads),
               MKL_NUM_THREADS=str(blas_threads))
    out = subprocess.run([sys.executable, __file__, "--child", data, str(epochs), str(torch_threads)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def grove_run(train_mlp, data, epochs):
    env = {k: v for k, v in os.environ.items() if k not in cp.UNSET}
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "metrics.csv")
        subprocess.run([train_mlp, "--data", data, "--epochs", str(epochs), "--metrics", metrics],
                       env=env, check=True, capture_output=True, text=True)
        with open(metrics) as f:
            rows = list(csv.DictReader(f))
    return {"seconds": sum(float(r["epoch_seconds"]) for r in rows),
            "accuracy": float(rows[-1]["test_accuracy"])}


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        return child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train-mlp", required=True, help="grove's train_mlp executable")
    p.add_argument("--data", default=DATA, help="the Fashion-MNIST directory (train_mlp's --data)")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--settings", nargs="+", default=["1x2", "2x1"],
                   help="PyTorch thread settings to try, TORCHxBLAS")
    p.add_argument("--rounds", type=int, default=1, help="rounds alternating grove and PyTorch")
    p.add_argument("--out", help="JSON file to write")
    args = p.parse_args()
    settings = [tuple(int(v) for v in s.split("x")) for s in args.settings]
    print(f"PyTorch's BLAS: {cp.loaded_blas()}", flush=True)
    grove, torch = [], {s: [] for s in settings}
    for _ in range(args.rounds):
        grove.append(grove_run(args.train_mlp, args.data, args.epochs))
        print(f"  grove: {grove[-1]['seconds']:.1f} s, accuracy {grove[-1]['accuracy']:.4f}", flush=True)
        for s in settings:
            torch[s].append(torch_run(args.data, args.epochs, *s))
            print(f"  PyTorch {s[0]} + BLAS {s[1]} threads: {torch[s][-1]['seconds']:.1f} s, "
                  f"accuracy {torch[s][-1]['accuracy']:.4f}", flush=True)
    grove_s = statistics.median(r["seconds"] for r in grove)
    torch_s, best = min((statistics.median(r["seconds"] for r in v), s) for s, v in torch.items())
    print(f"{args.epochs} epochs: grove {grove_s:.1f} s, PyTorch {torch_s:.1f} s (torch {best[0]} + "
          f"BLAS {best[1]} threads), grove / PyTorch {grove_s / torch_s:.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"epochs": args.epochs, "grove": grove, "torch": {f"{s[0]}x{s[1]}": v
                       for s, v in torch.items()}, "grove_s": grove_s, "torch_s": torch_s}, f, indent=1)


if __name__ == "__main__":
    main()
