#!/usr/bin/env python3
"""One training step of a model in PyTorch next to grove's, in one run.

Models (--models): mlp, the [784, 512, 512, 10] swish MLP (grove: bench_nn's step_sgd_fused);
residual, 784 -> 512, two blocks x + gelu(dense(layer_norm(x))) (gelu's tanh approximation,
layer norm eps 1e-6), -> 10 with softmax cross-entropy (grove: model_residual); tanh_mse, the
[784, 512, 512, 10] tanh MLP with the mean squared error against random targets (grove:
model_tanh_mse). Each grove model is written with nn::sequential and trained by nn::train_step.

The step is the same in both: forward, the loss, backward, plain SGD update, float32, the same
batch shapes. PyTorch runs in a fresh process per thread setting (its thread pools are fixed at
start-up), and for each thread budget its best setting counts: with a budget of 2, PyTorch's own
threads (torch.set_num_threads) and OpenBLAS's (OPENBLAS_NUM_THREADS) are tried at 1 and 2 each.
grove's figure is bench_nn's step_sgd_fused (sgd_step: the walk-through's update) at the same
batch and threads. Rounds alternate grove and PyTorch and the medians are compared, so that a
shared machine's changing load weighs on both alike.

    /usr/bin/python3 bench/compare_pytorch.py --bench build/release/bench/bench_nn

Needs Debian's python3-torch (scripts/ensure-packages.sh python3-torch); the tests do not. These
machines may set OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for old OpenBLAS builds; this script
unsets both for itself and for the programs it runs, and says so.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

SIZES = [784, 512, 512, 10]
PARAMS = sum(m * n + n for m, n in zip(SIZES[:-1], SIZES[1:]))
UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


GROVE_NAMES = {"mlp": "step_sgd_fused", "residual": "model_residual", "tanh_mse": "model_tanh_mse"}
DESCRIPTIONS = {"mlp": "784-512-512-10 swish, cross-entropy",
                "residual": "784-512, 2 x (x + gelu(dense(layer_norm(x)))), -10, cross-entropy",
                "tanh_mse": "784-512-512-10 tanh, mse"}


def torch_step_ms(model, batch, torch_threads, blas_threads, seconds):
    """Times PyTorch's step in a child process with the given thread settings; returns ms/step."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(OMP_NUM_THREADS=str(torch_threads), OPENBLAS_NUM_THREADS=str(blas_threads),
               MKL_NUM_THREADS=str(blas_threads))
    out = subprocess.run([sys.executable, __file__, "--child", model, str(batch), str(torch_threads),
                          str(seconds)], env=env, check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def loaded_blas():
    """The BLAS libraries a PyTorch process has mapped after a product (from /proc/self/maps)."""
    code = ("import torch\n(torch.rand(64, 64) @ torch.rand(64, 64)).sum().item()\n"
            "libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'blas' in l.lower() "
            "or 'mkl' in l.lower()})\nprint(' '.join(libs) or 'none found')")
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True).stdout.strip()


def torch_model(name):
    import torch
    if name == "residual":
        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = torch.nn.LayerNorm(512, eps=1e-6)
                self.dense = torch.nn.Linear(512, 512)

            def forward(self, x):
                return x + torch.nn.functional.gelu(self.dense(self.norm(x)), approximate="tanh")
        return torch.nn.Sequential(torch.nn.Linear(784, 512), Block(), Block(), torch.nn.Linear(512, 10))
    act = torch.nn.SiLU if name == "mlp" else torch.nn.Tanh
    layers = []
    for i, (m, n) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        layers.append(torch.nn.Linear(m, n))
        if i + 2 < len(SIZES):
            layers.append(act())
    return torch.nn.Sequential(*layers)


def child(name, batch, threads, seconds):
    import time
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch_model(name)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.rand(batch, SIZES[0])
    if name == "tanh_mse":
        y = torch.randn(batch, SIZES[-1])
        loss_fn = torch.nn.functional.mse_loss
    else:
        y = torch.randint(0, SIZES[-1], (batch,))
        loss_fn = torch.nn.functional.cross_entropy

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(10):
        step()
    # Median of rounds of several steps each, as Google Benchmark repeats.
    per_round = max(1, int(0.05 / 0.002) if batch <= 256 else 5)
    print(1e3 * median_seconds(step, seconds, time.perf_counter, per_round, min_rounds=5))


def median_seconds(call, seconds, clock, per_round, min_rounds):
    """The median time of one call in seconds, by `clock`, over rounds of `per_round` calls each,
    for `seconds` and at least `min_rounds` rounds: the timing loop of bench/'s Python baselines."""
    import time
    times = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline or len(times) < min_rounds:
        t0 = clock()
        for _ in range(per_round):
            call()
        times.append((clock() - t0) / per_round)
    return statistics.median(times)


def grove_step_ms(bench, batch, threads, seconds, name="step_sgd_fused"):
    """bench_nn's time for `name` at this batch and thread count, in ms."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([bench, f"--benchmark_filter=^{name}/batch:{batch}/threads:{threads}/",
                        f"--benchmark_out={out.name}", "--benchmark_out_format=json",
                        f"--benchmark_min_time={seconds}"],
                       env=env, check=True, capture_output=True, text=True)
        data = json.load(open(out.name))
    times = [b["real_time"] for b in data["benchmarks"] if b.get("run_type") == "iteration"]
    if not times:
        raise RuntimeError(f"bench_nn ran no {name} at batch {batch}, {threads} threads")
    assert all(b["time_unit"] == "ms" for b in data["benchmarks"])
    return statistics.median(times)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", required=True, help="grove's bench_nn executable")
    p.add_argument("--batches", type=int, nargs="+", default=[128, 1024])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread budgets")
    p.add_argument("--models", nargs="+", default=["mlp", "residual", "tanh_mse"],
                   choices=sorted(GROVE_NAMES), help="which models to compare")
    p.add_argument("--seconds", type=float, default=1.0, help="measuring time per configuration and round")
    p.add_argument("--rounds", type=int, default=3,
                   help="rounds that alternate grove and PyTorch; medians are reported (a shared machine's "
                        "load then weighs on both alike)")
    args = p.parse_args()
    for v in UNSET:
        if v in os.environ:
            print(f"note: unsetting {v}={os.environ[v]} for this comparison")
    try:
        import torch
    except ImportError:
        sys.exit("compare_pytorch.py: PyTorch is missing; install Debian's python3-torch")
    print(f"PyTorch {torch.__version__}, BLAS loaded: {loaded_blas()}")
    print(f"step = forward + loss + backward + SGD, float32; medians of {args.rounds} rounds")
    for name in args.models:
        print(f"\n{name}: {DESCRIPTIONS[name]} (grove: bench_nn's {GROVE_NAMES[name]})")
        print(f"{'batch':>5} {'threads':>7} {'grove ms':>9} {'torch ms':>9} {'torch setting':>22} "
              f"{'grove/torch':>11}")
        for batch in args.batches:
            for budget in args.threads:
                settings = [(t, b) for t in range(1, budget + 1) for b in range(1, budget + 1)]
                grove_times, torch_times = [], {s: [] for s in settings}
                for _ in range(args.rounds):
                    grove_times.append(grove_step_ms(args.bench, batch, budget, args.seconds,
                                                     GROVE_NAMES[name]))
                    for t, b in settings:
                        torch_times[(t, b)].append(torch_step_ms(name, batch, t, b, args.seconds))
                g = statistics.median(grove_times)
                best = min((statistics.median(v), s) for s, v in torch_times.items())
                setting = f"torch {best[1][0]} + OpenBLAS {best[1][1]}"
                print(f"{batch:>5} {budget:>7} {g:>9.3f} {best[0]:>9.3f} {setting:>22} "
                      f"{g / best[0]:>11.2f}", flush=True)


if __name__ == "__main__":
    main()
