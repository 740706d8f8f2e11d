#!/usr/bin/env python3
"""The baseline of bench_tree's structure operations: torch.utils._pytree on the same trees.

Times tree_flatten, tree_unflatten and tree_map (identity) of PyTorch's pytree module on the three
trees bench_tree.cpp builds, in Python containers:

  resnet50       a train state {params, grads, mu, nu} of four ResNet-50 parameter trees as Flax
                 lays them out (dicts for grove's structs, lists for its vectors, small float32
                 tensors at the leaves); grove's std::optional projection is None where absent,
                 which torch's pytree counts as a leaf (grove: a node without leaves)
  wide_map_2000  a dict of 2,000 floats, keys "param_0" ... "param_1999"
  deep_100       100 nested 2-tuples (float, deeper)

Writes JSON: {"torch": version, "benchmarks": [{"name": "flatten/resnet50", "cpu_time": ns per
call (this thread's CPU time), "leaves": ...}, ...]}; each time is the median of rounds of several calls. Run it with
Debian's python3 (/usr/bin/python3), which has python3-torch:

    /usr/bin/python3 bench/pytree_torch.py --out tree_torch.json [--seconds 0.5]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402  (this directory's module, after the path)


def small(torch, n):
    return torch.full((n,), 0.5)


def batch_norm(torch, c):
    n = c % 16 + 1
    return {"scale": small(torch, n), "bias": small(torch, n), "mean": small(torch, n),
            "var": small(torch, n)}


def resnet50(torch):
    stages = {}
    for s, blocks in enumerate([3, 4, 6, 3]):
        stage = []
        for b in range(blocks):
            block = {"conv1": {"kernel": small(torch, 8)}, "conv2": {"kernel": small(torch, 8)},
                     "conv3": {"kernel": small(torch, 8)}, "bn1": batch_norm(torch, s),
                     "bn2": batch_norm(torch, s), "bn3": batch_norm(torch, s), "projection": None}
            if b == 0:
                block["projection"] = ({"kernel": small(torch, 8)}, batch_norm(torch, s))
            stage.append(block)
        stages[f"stage{s + 1}"] = stage
    return {"stem": {"kernel": small(torch, 64)}, "stem_bn": batch_norm(torch, 64), "stages": stages,
            "head": {"w": torch.ones(10, 16), "b": torch.ones(10)}}


def train_state(torch):
    return {"params": resnet50(torch), "grads": resnet50(torch), "mu": resnet50(torch),
            "nu": resnet50(torch)}


def wide_map(torch):
    return {f"param_{i}": float(i) for i in range(2000)}


def deep_100(torch):
    tree = 0.0
    for n in range(1, 101):
        tree = (float(n), tree)
    return tree


def time_call(call, seconds):
    """Median CPU time of one call in ns (this thread's, as bench_tree's figures are CPU time, so
    that other load on a shared machine weighs less), over rounds of about 10 ms each."""
    for _ in range(3):
        call()
    t0 = time.thread_time()
    call()
    once = max(time.thread_time() - t0, 1e-6)
    per_round = max(1, int(0.01 / once))
    return 1e9 * cp.median_seconds(call, seconds, time.thread_time, per_round, min_rounds=3)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--seconds", type=float, default=0.5, help="measuring time per operation and tree")
    args = p.parse_args()
    try:
        import torch
        import torch.utils._pytree as pytree
    except ImportError:
        sys.exit("pytree_torch.py: PyTorch is missing; install Debian's python3-torch "
                 "(and run this with /usr/bin/python3)")
    rows = []
    for tree_name, make in [("resnet50", train_state), ("wide_map_2000", wide_map),
                            ("deep_100", deep_100)]:
        tree = make(torch)
        leaves, spec = pytree.tree_flatten(tree)
        ops = {"flatten": lambda: pytree.tree_flatten(tree),
               "unflatten": lambda: pytree.tree_unflatten(leaves, spec),
               "map": lambda: pytree.tree_map(lambda x: x, tree)}
        for op, call in ops.items():
            rows.append({"name": f"{op}/{tree_name}", "cpu_time": time_call(call, args.seconds),
                         "time_unit": "ns", "leaves": len(leaves)})
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "benchmarks": rows}, f, indent=1)


if __name__ == "__main__":
    main()
