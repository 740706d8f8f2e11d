#!/usr/bin/env python3
"""The MLP step in PyTorch next to grove's, as JSON for scripts/bench_report.py.

compare_pytorch.py's measurement (the same [784, 512, 512, 10] swish MLP step, PyTorch in a fresh
process per thread setting, its best setting per thread budget, rounds alternating grove and
PyTorch, medians), written as data instead of a console table, together with the BLAS that
PyTorch loaded: Debian's python3-torch calls whichever libblas.so.3 the system provides, and
with the reference BLAS (netlib's, no blocking, one thread) its products are an order of
magnitude slower, so a ratio against it says nothing about grove. This script says which library
it is and, for OpenBLAS, the kernel it chose for this CPU (openblas_get_corename).

    /usr/bin/python3 bench/torch_step.py --bench build/bench/bench/bench_nn --out nn_torch.json

JSON: {"torch": version, "blas": {"libraries": [...], "kind": "openblas" | "reference" | ...,
"kernel": ..., "config": ...}, "rows": [{"batch", "threads", "grove_ms", "torch_ms",
"torch_setting"}, ...]}. With a reference (or unknown) BLAS, PyTorch's step is still timed once
per setting, but bench_report.py prints no ratio for it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402  (this directory's module, after the path)

BLAS_PROBE = r"""
import ctypes, json, torch
(torch.rand(64, 64) @ torch.rand(64, 64)).sum().item()
libs = sorted({l.split()[-1] for l in open('/proc/self/maps')
               if any(k in l.lower() for k in ('blas', 'mkl', 'blis', 'atlas'))})
info = {'libraries': libs, 'kind': 'none found', 'kernel': '', 'config': ''}
joined = ' '.join(libs).lower()
if 'openblas' in joined:
    info['kind'] = 'openblas'
    lib = ctypes.CDLL(next(l for l in libs if 'openblas' in l.lower()))
    for field, fn in (('kernel', 'openblas_get_corename'), ('config', 'openblas_get_config')):
        f = getattr(lib, fn, None)
        if f is not None:
            f.restype = ctypes.c_char_p
            info[field] = f().decode()
elif 'mkl' in joined:
    info['kind'] = 'mkl'
elif 'blis' in joined:
    info['kind'] = 'blis'
elif 'atlas' in joined:
    info['kind'] = 'atlas'
elif any(l.endswith('/blas/libblas.so.3') or 'libblas.so' in l for l in libs):
    info['kind'] = 'reference'
print(json.dumps(info))
"""


def blas_info():
    """Which BLAS a PyTorch process has mapped after a product, and OpenBLAS's kernel."""
    env = {k: v for k, v in os.environ.items() if k not in cp.UNSET}
    out = subprocess.run([sys.executable, "-c", BLAS_PROBE], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", required=True, help="grove's bench_nn executable")
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--batches", type=int, nargs="+", default=[128, 1024])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread budgets")
    p.add_argument("--seconds", type=float, default=1.0, help="measuring time per setting and round")
    p.add_argument("--rounds", type=int, default=3, help="rounds alternating grove and PyTorch")
    args = p.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("torch_step.py: PyTorch is missing; install Debian's python3-torch "
                 "(and run this with /usr/bin/python3)")
    blas = blas_info()
    optimised = blas["kind"] in ("openblas", "mkl", "blis")
    rows = []
    for batch in args.batches:
        for budget in args.threads:
            settings = [(t, b) for t in range(1, budget + 1) for b in range(1, budget + 1)]
            # Against an unoptimised BLAS no ratio is printed: one round of one setting says so.
            rounds = args.rounds if optimised else 1
            if not optimised:
                settings = settings[:1]
            grove_times, torch_times = [], {s: [] for s in settings}
            for _ in range(rounds):
                grove_times.append(cp.grove_step_ms(args.bench, batch, budget, args.seconds))
                for t, b in settings:
                    torch_times[(t, b)].append(cp.torch_step_ms("mlp", batch, t, b, args.seconds))
            best_ms, (t, b) = min((statistics.median(v), s) for s, v in torch_times.items())
            rows.append({"batch": batch, "threads": budget,
                         "grove_ms": statistics.median(grove_times), "torch_ms": best_ms,
                         "torch_setting": f"torch {t} + BLAS {b} threads", "rounds": rounds})
            print(f"  batch {batch}, {budget} thread(s): grove {rows[-1]['grove_ms']:.3f} ms, "
                  f"PyTorch {best_ms:.3f} ms", flush=True)
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "blas": blas, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
