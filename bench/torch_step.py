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

With --autocast it times, instead of grove's step, PyTorch's own step twice, in alternation: as
above (float32, its products on the BLAS) and with its forward and loss under
torch.autocast("cpu", torch.bfloat16), the same model, optimizer and batches (bf16 mixed
precision as PyTorch's recipe has it; --bench is not needed):

    /usr/bin/python3 bench/torch_step.py --autocast --out precision_torch.json

JSON: {"torch", "blas", "autocast": {"onednn": ["primitive implementation", ...], "isa",
"max_cpu_isa"}, "rows": [{"batch", "threads", "f32_ms", "bf16_ms", "f32_setting",
"bf16_setting", "rounds"}, ...]}. "onednn" lists the oneDNN primitives that ran on bf16 data in
one autocast step (from oneDNN's verbose log): empty where PyTorch does not hand its bf16
products to oneDNN on this CPU, and then ATen's own bf16 code ran them. ONEDNN_MAX_CPU_ISA, when
set, caps the oneDNN inside PyTorch as it caps bench_precision's.
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


AUTOCAST_SETUP = r"""
import sys, torch
sys.path.insert(0, {bench_dir!r})
import compare_pytorch as cp
torch.set_num_threads({threads})
torch.manual_seed(0)
model = cp.torch_model("mlp")
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.rand({batch}, cp.SIZES[0])
y = torch.randint(0, cp.SIZES[-1], ({batch},))


def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
"""

# One autocast step with oneDNN's verbose log on: which primitives ran, on which instruction set.
AUTOCAST_PROBE = AUTOCAST_SETUP + r"""
step()
try:
    with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        step()
except (AttributeError, RuntimeError):
    step()  # ONEDNN_VERBOSE in the environment logs it then
"""

# compare_pytorch.py's child loop, with the step above; a slow step (ATen's own bf16 products,
# where oneDNN does not take them, are far slower than the BLAS's float ones) gets fewer steps
# per round and fewer rounds, so that a run stays within minutes.
AUTOCAST_TIMING = AUTOCAST_SETUP + r"""
import time
for _ in range(2):
    step()
t0 = time.perf_counter()
step()
once = time.perf_counter() - t0
per_round = max(1, int(0.05 / once))
print(1e3 * cp.median_seconds(step, {seconds}, time.perf_counter, per_round, min_rounds=3))
"""


def child_env(torch_threads, blas_threads, **extra):
    env = {k: v for k, v in os.environ.items() if k not in cp.UNSET}
    env.update(OMP_NUM_THREADS=str(torch_threads), OPENBLAS_NUM_THREADS=str(blas_threads),
               MKL_NUM_THREADS=str(blas_threads), **extra)
    return env


def autocast_step_ms(batch, torch_threads, blas_threads, seconds):
    """PyTorch's autocast bf16 step in a child process with the given thread settings, ms/step."""
    code = AUTOCAST_TIMING.format(bench_dir=os.path.dirname(os.path.abspath(__file__)),
                                  threads=torch_threads, batch=batch, seconds=seconds)
    out = subprocess.run([sys.executable, "-c", code], env=child_env(torch_threads, blas_threads),
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def autocast_info(batch):
    """The oneDNN primitives (with their implementation) that ran on bf16 data in one autocast
    step, and the instruction set oneDNN reported."""
    code = AUTOCAST_PROBE.format(bench_dir=os.path.dirname(os.path.abspath(__file__)),
                                 threads=1, batch=batch)
    out = subprocess.run([sys.executable, "-c", code], env=child_env(1, 1, ONEDNN_VERBOSE="1"),
                         check=True, capture_output=True, text=True).stdout
    impls, isa = set(), ""
    for line in out.splitlines():
        fields = line.split(",")
        if line.startswith("onednn_verbose,info,cpu,isa:"):
            isa = line.split("isa:", 1)[1].strip()
        elif line.startswith("onednn_verbose,exec,cpu,") and len(fields) > 6 and "bf16" in line:
            impls.add(f"{fields[3]} {fields[4]}")
    return {"onednn": sorted(impls), "isa": isa,
            "max_cpu_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "")}


def autocast_rows(args, optimised):
    """PyTorch's float32 step and its autocast bf16 step, in alternating rounds, each in its best
    thread setting per budget."""
    rows = []
    for batch in args.batches:
        for budget in args.threads:
            settings = [(t, b) for t in range(1, budget + 1) for b in range(1, budget + 1)]
            # Under autocast no product goes to the BLAS (they are bf16: oneDNN's or ATen's, on
            # PyTorch's own threads), so only PyTorch's thread count is varied.
            bf16_settings = [(t, 1) for t in range(1, budget + 1)]
            rounds = args.rounds if optimised else 1
            if not optimised:
                settings, bf16_settings = settings[:1], bf16_settings[:1]
            f32 = {s: [] for s in settings}
            bf16 = {s: [] for s in bf16_settings}
            for _ in range(rounds):
                for t, b in settings:
                    f32[(t, b)].append(cp.torch_step_ms("mlp", batch, t, b, args.seconds))
                for t, b in bf16_settings:
                    bf16[(t, b)].append(autocast_step_ms(batch, t, b, args.seconds))
            f32_ms, (ft, fb) = min((statistics.median(v), s) for s, v in f32.items())
            bf16_ms, (bt, bb) = min((statistics.median(v), s) for s, v in bf16.items())
            rows.append({"batch": batch, "threads": budget, "f32_ms": f32_ms, "bf16_ms": bf16_ms,
                         "f32_setting": f"torch {ft} + BLAS {fb} threads",
                         "bf16_setting": f"torch {bt} + BLAS {bb} threads", "rounds": rounds})
            print(f"  batch {batch}, {budget} thread(s): PyTorch f32 {f32_ms:.3f} ms, "
                  f"autocast bf16 {bf16_ms:.3f} ms", flush=True)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", help="grove's bench_nn executable (needed without --autocast)")
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--autocast", action="store_true",
                   help="time PyTorch's f32 step against its autocast bf16 step instead")
    p.add_argument("--batches", type=int, nargs="+", default=[128, 1024])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread budgets")
    p.add_argument("--seconds", type=float, default=1.0, help="measuring time per setting and round")
    p.add_argument("--rounds", type=int, default=3, help="rounds alternating grove and PyTorch")
    args = p.parse_args()
    if not args.autocast and not args.bench:
        p.error("--bench is required (except with --autocast)")
    try:
        import torch
    except ImportError:
        sys.exit("torch_step.py: PyTorch is missing; install Debian's python3-torch "
                 "(and run this with /usr/bin/python3)")
    blas = blas_info()
    optimised = blas["kind"] in ("openblas", "mkl", "blis")
    if args.autocast:
        info = autocast_info(args.batches[0])
        print(f"  autocast bf16: oneDNN primitives on bf16 data: "
              f"{', '.join(info['onednn']) or 'none (ATen ran them)'}", flush=True)
        rows = autocast_rows(args, optimised)
        with open(args.out, "w") as f:
            json.dump({"torch": torch.__version__, "blas": blas, "autocast": info, "rows": rows},
                      f, indent=1)
        return
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
