#!/usr/bin/env python3
"""scripts/bench.sh's tables: grove's figure, the baseline's and their ratio, per family, from the
benchmarks' JSON output (Google Benchmark's --benchmark_out, and bench/*.py's).

    /usr/bin/python3 scripts/bench_report.py --results DIR [--csv DIR] [--plot DIR]

Reads from DIR whichever of these exist (a family whose files are missing is left out, and the
report says so):

  tree.json        bench_tree                  tree ops vs a hand-written loop (CPU time per call)
  tree_torch.json  bench/pytree_torch.py       the same trees' flatten/unflatten/map in
                                               torch.utils._pytree (CPU time per call)
  random.json      bench_random                grove::random vs std::mt19937 + <random>
  nn.json          bench_nn (step_*)           the MLP step vs its bare GEMMs, same iterations;
                                               step_precision and apply_precision: bf16 vs f32
                                               (in the precision family)
  nn_torch.json    bench/torch_step.py         the MLP step vs PyTorch's, and the BLAS it loaded
  nn_jax.json      bench/jax_step.py           the MLP step vs JAX's (jax.jit, optax, XLA:CPU)
  main_jax.json    bench/main_job_jax.py       the main job's epochs vs the same training in JAX
  parallel.json    bench_parallel, rank 0 of   the pytree allreduce vs a bare MPI_Allreduce
                   mpirun -np 2
  precision.json   bench_precision             the MLP step's 8 products in bf16 and f32, grove
                                               vs oneDNN's matmul; the vdpbf16ps and f32 FMA
                                               register-only peaks
  precision_avx2   bench_precision with both   the f32 products again, grove's AVX2 kernel vs
  .json            libraries capped to AVX2    oneDNN's AVX2 code (on CPUs with AVX-512)
  precision_torch  bench/torch_step.py         PyTorch's autocast bf16 step vs its f32 step
  .json            --autocast
  data.json        bench_data                  epochs of the main job's training fed by
                                               grove::data's batches (with and without prefetch)
                                               vs precomputed batches; load_npy vs dd

Every ratio is grove's time over the baseline's, measured in the same run: below 1, grove is
faster (for random numbers, 1 / ratio is grove's speed-up over std). The precision family's
last rows are not grove's: the vdpbf16ps peak over the f32 FMA's (GFLOP/s), PyTorch's autocast
step over its f32 step. A ratio against PyTorch on the reference BLAS is refused (the row says
why), and so is one against oneDNN's reference (`ref`) code or against a oneDNN product that
this CPU does not have. Writes one CSV per family (columns family, case, grove, baseline,
baseline_value, unit, ratio, note) into --csv (default: DIR), and with --plot one bar chart of
the ratios per family (FAMILY.png) into that directory, which is created if it does not exist
(its parent must). Exit status 2 for a usage error, 1 for a failure.
"""
import argparse
import csv
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_common import Failure, UsageError, pyplot, run, save_png  # noqa: E402

PROGRAM = "bench_report.py"
FIELDS = ["family", "case", "grove", "baseline", "baseline_value", "unit", "ratio", "note"]
TITLES = {"tree": "Pytrees (CPU time per call)",
          "random": "Random numbers (time per 10^7 float32 values)",
          "mlp": "The MLP step [784, 512, 512, 10], float32",
          "allreduce": "Allreduce of the MLP's gradients, mpirun -np 2",
          "precision": "bf16 mixed precision: the MLP step's 8 products, peaks, PyTorch autocast",
          "data": "grove::data: the data path in the main job's epochs; reading .npy"}
UNIT_SCALE = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}  # to microseconds


def load(results, name):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Failure(f"{PROGRAM}: {path}: not readable as JSON ({e})") from None


def iterations(data):
    """Google Benchmark's per-benchmark results by run name, the fastest when repeated."""
    best = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        name = b.get("run_name", b["name"])
        if name not in best or b["real_time"] < best[name]["real_time"]:
            best[name] = b
    return best


def micros(b, field):
    return b[field] * UNIT_SCALE[b.get("time_unit", "ns")]


def row(family, case, grove, baseline, baseline_value, unit, ratio, note=""):
    return {"family": family, "case": case, "grove": grove, "baseline": baseline,
            "baseline_value": baseline_value, "unit": unit, "ratio": ratio, "note": note}


def tree_rows(results, notes):
    rows = []
    data = load(results, "tree.json")
    if data is None:
        notes.append("tree: no tree.json (bench_tree did not run)")
        return rows
    runs = iterations(data)
    for op, what in [("map_tuple", "tree_map, tuple of 4 Eigen matrices"),
                     ("map_mlp", "tree_map, MLP params (p - 0.01 g)"),
                     ("update_mlp", "tree_for_each, MLP params in place")]:
        g, h = runs.get(f"BM_{op}_grove"), runs.get(f"BM_{op}_hand")
        if g and h:
            rows.append(row("tree", what, micros(g, "cpu_time"), "hand-written loop",
                            micros(h, "cpu_time"), "us", g["cpu_time"] / h["cpu_time"]))
    torch = load(results, "tree_torch.json")
    if torch is None:
        notes.append("tree: no tree_torch.json (torch.utils._pytree was not timed)")
        return rows
    theirs = {b["name"]: b for b in torch["benchmarks"]}
    label = f"torch.utils._pytree ({torch.get('torch', '?')})"
    for tree in ["resnet50", "wide_map_2000", "deep_100"]:
        for op in ["flatten", "unflatten", "map"]:
            g, t = runs.get(f"BM_{op}/{tree}"), theirs.get(f"{op}/{tree}")
            if g and t:
                gu, tu = micros(g, "cpu_time"), micros(t, "cpu_time")
                rows.append(row("tree", f"{op}, {tree}", gu, label, tu, "us", gu / tu))
    return rows


def random_rows(results, notes):
    data = load(results, "random.json")
    if data is None:
        notes.append("random: no random.json (bench_random did not run)")
        return []
    rows = []
    for name, b in iterations(data).items():
        if "x_std" not in b or not b.get("samples/s"):
            continue
        # name: grove_<way>[_type]/<what>/threads:T/real_time
        parts = name.split("/")
        way = "new vector" if parts[0].startswith("grove_alloc") else "into a buffer"
        threads = parts[2].split(":")[1] if len(parts) > 2 else "1"
        threads = "all threads" if threads == "0" else f"{threads} thread" + ("s" if threads != "1" else "")
        dist = "uniform" if "uniform" in parts[1] or "bits" in parts[1] else "normal"
        ms = 1e3 * 1e7 / b["samples/s"]
        rows.append(row("random", f"{parts[1]}, {way}, {threads}", ms,
                        "std::mt19937 + std::" + ("uniform_real" if dist == "uniform" else dist) + "_distribution", ms * b["x_std"], "ms",
                        1 / b["x_std"]))
    return rows


def blas_text(blas):
    if blas["kind"] == "openblas":
        return f"OpenBLAS, kernel {blas.get('kernel') or '?'} ({blas.get('config', '')})"
    return f"{blas['kind']} ({' '.join(blas.get('libraries', [])) or 'no BLAS library mapped'})"


def mlp_rows(results, notes):
    rows = []
    data = load(results, "nn.json")
    if data is None:
        notes.append("mlp: no nn.json (bench_nn did not run)")
    else:
        steps = ["step_sgd_fused", "step_sgd", "step_momentum", "step_adam", "step_adamw"]

        def order(kv):  # bench_nn's order: the step, then batch and threads as numbers
            parts = kv[0].split("/")
            args = [int(p.split(":")[1]) for p in parts[1:3] if ":" in p]
            return (steps.index(parts[0]) if parts[0] in steps else len(steps), parts[0], args)

        for name, b in sorted(iterations(data).items(), key=order):
            if "step/GEMMs" not in b or "GEMMs_ms" not in b:
                continue
            parts = name.split("/")  # step_adam/batch:128/threads:1/...
            batch, threads = parts[1].split(":")[1], parts[2].split(":")[1]
            step = parts[0].removeprefix("step_")
            ms = micros(b, "real_time") / 1e3
            rows.append(row("mlp", f"{step}, batch {batch}, {threads} thread(s)", ms,
                            "its bare GEMMs", b["GEMMs_ms"], "ms", b["step/GEMMs"]))
        for name, b in sorted(iterations(data).items()):
            if not name.startswith("step_loaded/") or "2T/1T" not in b:
                continue
            parts = name.split("/")  # step_loaded/batch:128/busy:1/...
            batch, busy = parts[1].split(":")[1], parts[2].split(":")[1] == "1"
            where = "beside a busy process" if busy else "quiet"
            rows.append(row("mlp", f"adam, batch {batch}, 2 threads, {where}", b["2T_ms"],
                            "1 thread, same load", b["1T_ms"], "ms", b["2T/1T"],
                            "target beside a busy process: at most 1.5" if busy else ""))
    torch = load(results, "nn_torch.json")
    if torch is None:
        notes.append("mlp: no nn_torch.json (PyTorch's step was not timed)")
        return rows
    blas = torch["blas"]
    optimised = blas["kind"] in ("openblas", "mkl", "blis")
    notes.append(f"mlp: PyTorch {torch.get('torch', '?')} on {blas_text(blas)}")
    for r in torch["rows"]:
        note = r["torch_setting"]
        ratio = r["grove_ms"] / r["torch_ms"]
        if not optimised:
            ratio = None
            note = (f"no ratio: PyTorch loaded the {blas['kind']} BLAS, not an optimised one "
                    f"(install libopenblas0-pthread); its figure says nothing about grove")
        rows.append(row("mlp", f"sgd_fused, batch {r['batch']}, {r['threads']} thread(s)",
                        r["grove_ms"], "PyTorch", r["torch_ms"], "ms", ratio, note))
    if not optimised:
        notes.append("mlp: ratios against PyTorch refused: it runs on the " + blas["kind"] +
                     " BLAS, where its products are an order of magnitude slower")
    return rows


def jax_rows(results, notes):
    """The step and the main job against JAX's (XLA:CPU), when they were timed."""
    rows = []
    step = load(results, "nn_jax.json")
    if step is None:
        notes.append("mlp: no nn_jax.json (JAX's step was not timed)")
    else:
        notes.append(f"mlp: JAX {step.get('jax', '?')} (jaxlib {step.get('jaxlib', '?')}, "
                     f"optax {step.get('optax', '?')}) on XLA:CPU")
        for r in step["rows"]:
            rows.append(row("mlp", f"sgd_fused, batch {r['batch']}, {r['threads']} thread(s)",
                            r["grove_ms"], "JAX", r["jax_ms"], "ms", r["grove_ms"] / r["jax_ms"],
                            "jax.jit of value_and_grad + optax.sgd"))
    job = load(results, "main_jax.json")
    if job is None:
        notes.append("mlp: no main_jax.json (the main job was not run against JAX)")
    else:
        rows.append(row("mlp", f"main job, {job['epochs']} epoch(s), all cores", job["grove_s"],
                        "JAX", job["jax_s"], "s", job["grove_s"] / job["jax_s"],
                        f"accuracy: grove {job['grove'][-1]['accuracy']:.4f}, "
                        f"JAX {job['jax'][-1]['accuracy']:.4f}"))
    return rows


def allreduce_rows(results, notes):
    data = load(results, "parallel.json")
    if data is None:
        notes.append("allreduce: no parallel.json (bench_parallel under mpirun -np 2 did not run)")
        return []
    rows = []
    for name, b in iterations(data).items():
        if not name.startswith("allreduce/mpi") or "overhead_%" not in b:
            continue
        rows.append(row("allreduce", "psum_inplace of the MLP's gradients (median)",
                        b["pytree_ms"], "bare MPI_Allreduce, as many floats", b["bare_ms"], "ms",
                        1 + b["overhead_%"] / 100, "ratio: median of paired ratios"))
    return rows


def data_rows(results, notes):
    data = load(results, "data.json")
    if data is None:
        notes.append("data: no data.json (bench_data did not run)")
        return []
    rows = []
    for name, b in iterations(data).items():
        if name.startswith("data_epoch/") and "precomputed_ms" in b:
            examples = name.split("examples:")[-1].split("/")[0]
            for path, what in [("batches", "data::batches"), ("prefetch", "data::batches, prefetch")]:
                rows.append(row("data", f"an epoch of {examples} examples, {what}",
                                b[f"{path}_ms"], "precomputed batches", b["precomputed_ms"], "ms",
                                b[f"{path}/precomputed"], "target: at most 1.02"))
        elif name.startswith("npy_read/") and "grove_MBps" in b:
            rows.append(row("data", "load_npy<float> of a 100 MB .npy (MB/s)", b["grove_MBps"],
                            "dd bs=1M of the same file", b["dd_MBps"], "MB/s",
                            1 / b["grove/dd"], "time ratio; target: at most 2"))
    return rows


def best_precision_runs(data):
    """bench_precision's runs by name, each the repetition with the smallest best_ms (each
    product's fastest run summed; the peaks' with the most GFLOP/s), as bench_precision's own
    summary picks them, rather than the fastest mean; and the errors by name."""
    runs = iterations(data)
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b["name"])
        if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
            continue
        if "best_ms" in b and b["best_ms"] < runs[name]["best_ms"]:
            runs[name] = b
        elif "best_ms" not in b and b.get("GFLOP/s", 0) > runs[name].get("GFLOP/s", 0):
            runs[name] = b
    errors = {b.get("run_name", b["name"]): b.get("error_message", "error")
              for b in data.get("benchmarks", []) if b.get("error_occurred")}
    return runs, errors


def product_rows(data, notes, tag, cap):
    """The rows of one bench_precision run's products: grove bf16 / f32 and grove / oneDNN in each
    precision, per batch and thread count; `cap` names the instruction sets the run was capped
    to ("" when it was not), `tag` starts its notes."""
    rows = []
    context = data.get("context", {})
    runs, errors = best_precision_runs(data)
    onednn_cap = context.get("onednn_max_cpu_isa") or "unset"
    notes.append(f"{tag}: oneDNN {context.get('onednn_version', '?')}, instruction set "
                 f"{context.get('onednn_isa', '?')} (ONEDNN_MAX_CPU_ISA={onednn_cap}); grove "
                 f"{context.get('grove_kernel', '?')}; AVX512-BF16 "
                 f"{context.get('avx512_bf16', '?')}")

    def ms(impl, suffix):
        b = runs.get(f"precision_products/{impl}{suffix}")
        if b is None:
            return None
        return b["best_ms"] if "best_ms" in b else micros(b, "real_time") / 1e3

    def what(impl, suffix):
        b = runs.get(f"precision_products/{impl}{suffix}")
        if b is not None:
            return b.get("label", "") or impl
        return errors.get(f"precision_products/{impl}{suffix}", "did not run")

    configs = sorted({tuple(int(p.split(":")[1]) for p in name.split("/")[2:4])
                      for name in list(runs) + list(errors)
                      if name.startswith("precision_products/")})
    ran = {}
    for batch, threads in configs:
        suffix = f"/batch:{batch}/threads:{threads}"
        where = f"batch {batch}, {threads} thread(s){cap}"
        g32, g16 = ms("grove_f32", suffix), ms("grove_bf16", suffix)
        d32, d16 = ms("onednn_f32", suffix), ms("onednn_bf16", suffix)
        for impl in ("grove_f32", "grove_bf16", "onednn_f32", "onednn_bf16"):
            name = f"precision_products/{impl}{suffix}"
            if name in runs or name in errors:  # (a filtered run leaves some out)
                ran.setdefault(impl, what(impl, suffix))
        if g16 is not None and g32 is not None:
            rows.append(row("precision", f"grove bf16 / grove f32, {where}", g16, "grove f32",
                            g32, "ms", g16 / g32))
        for grove, theirs, impl, name in ((g32, d32, "onednn_f32", "oneDNN f32"),
                                          (g16, d16, "onednn_bf16", "oneDNN bf16")):
            if grove is None:
                continue
            case = f"grove {name.split()[1]} / {name}, {where}"
            if theirs is None:
                rows.append(row("precision", case, grove, name, None, "ms", None,
                                f"no ratio: {what(impl, suffix)}"))
            elif "ref:" in what(impl, suffix):
                rows.append(row("precision", case, grove, name, theirs, "ms", None,
                                f"no ratio: oneDNN ran its reference code "
                                f"({what(impl, suffix)}), no kernel for this CPU"))
            else:
                rows.append(row("precision", case, grove, name, theirs, "ms", grove / theirs))
    for impl, text in ran.items():
        notes.append(f"{tag}: {impl}: {text}")
    return rows


def precision_rows(results, notes):
    rows = []
    data = load(results, "precision.json")
    if data is None:
        notes.append("precision: no precision.json (bench_precision did not run: it is built "
                     "only where oneDNN is found, Debian: libdnnl-dev)")
    else:
        rows += product_rows(data, notes, "precision", "")
        # The float32 products once more with both libraries held to AVX2 (scripts/bench.sh runs
        # it on CPUs with AVX-512): what an AVX2-only CPU runs, grove's AVX2 kernel and oneDNN's.
        capped = load(results, "precision_avx2.json")
        if capped is not None:
            rows += product_rows(capped, notes, "precision_avx2", ", both on AVX2")
        runs, errors = best_precision_runs(data)
        fma, dp = runs.get("precision_peak/fma_f32"), runs.get("precision_peak/vdpbf16ps")
        if fma is not None or dp is not None:
            fma_label = f"f32 FMA ({fma.get('label', '')})" if fma else "f32 FMA"
            if dp is None:
                rows.append(row("precision", "register-only peak: vdpbf16ps / f32 FMA", None,
                                fma_label, fma["GFLOP/s"] if fma else None, "GFLOP/s", None,
                                errors.get("precision_peak/vdpbf16ps", "vdpbf16ps did not run")))
            else:
                rows.append(row("precision", "register-only peak: vdpbf16ps / f32 FMA",
                                dp["GFLOP/s"], fma_label, fma["GFLOP/s"] if fma else None,
                                "GFLOP/s", dp["GFLOP/s"] / fma["GFLOP/s"] if fma else None,
                                "" if fma else "the FMA peak did not run"))
    nn = load(results, "nn.json")
    for name, b in sorted(iterations(nn).items() if nn is not None else []):
        if not name.startswith("step_precision/") or "bf16/f32" not in b:
            continue
        parts = name.split("/")  # step_precision/batch:128/threads:1/...
        batch, threads = parts[1].split(":")[1], parts[2].split(":")[1]
        emulated = "rounded" in b.get("label", "") or "copies" in b.get("label", "")
        rows.append(row("precision", f"grove adam step bf16 / f32, batch {batch}, "
                        f"{threads} thread(s)", b["bf16_ms"], "grove f32 step", b["f32_ms"], "ms",
                        b["bf16/f32"],
                        "target where bf16 is emulated: at most 1.2" if emulated else
                        b.get("label", "")))
    for name, b in sorted(iterations(nn).items() if nn is not None else []):
        if not name.startswith("apply_precision/") or "bf16/f32" not in b:
            continue
        batch = name.split("/")[1].split(":")[1]  # apply_precision/batch:1/...
        rows.append(row("precision", f"grove apply bf16 / f32, batch {batch}, 1 thread",
                        1e3 * b["bf16_ms"], "grove f32 apply", 1e3 * b["f32_ms"], "us",
                        b["bf16/f32"], b.get("label", "")))
    torch = load(results, "precision_torch.json")
    if torch is None:
        notes.append("precision: no precision_torch.json (PyTorch's autocast step was not timed)")
        return rows
    blas = torch["blas"]
    optimised = blas["kind"] in ("openblas", "mkl", "blis")
    info = torch.get("autocast", {})
    onednn = ", ".join(info.get("onednn", [])) or "none: ATen's own bf16 code ran them"
    notes.append(f"precision: PyTorch {torch.get('torch', '?')} autocast bf16, oneDNN primitives "
                 f"on bf16 data: {onednn}; its f32 step on {blas_text(blas)}")
    for r in torch["rows"]:
        ratio = r["bf16_ms"] / r["f32_ms"]
        note = f"bf16 {r['bf16_setting']}, f32 {r['f32_setting']}"
        if not optimised:
            ratio = None
            note = (f"no ratio: PyTorch's f32 step ran on the {blas['kind']} BLAS, not an "
                    f"optimised one (install libopenblas0-pthread)")
        rows.append(row("precision", f"PyTorch autocast bf16 / its f32 step, batch {r['batch']}, "
                        f"{r['threads']} thread(s)", r["bf16_ms"], "PyTorch f32 step",
                        r["f32_ms"], "ms", ratio, note))
    return rows


def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.4g}" if abs(x) < 1e5 else f"{x:.0f}"


def print_table(family, rows):
    print(f"\n{TITLES[family]}")
    header = ["case", "grove", "baseline", "baseline's", "unit", "grove/baseline"]
    cells = [[r["case"], fmt(r["grove"]), r["baseline"], fmt(r["baseline_value"]), r["unit"],
              "refused" if r["ratio"] is None else f"{r['ratio']:.3f}"] for r in rows]
    widths = [max(len(header[i]), *(len(c[i]) for c in cells)) for i in range(len(header))]
    line = lambda c: "  ".join(c[i].ljust(widths[i]) if i in (0, 2) else c[i].rjust(widths[i])
                               for i in range(len(c)))
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for c, r in zip(cells, rows):
        print(line(c) + (f"  ({r['note']})" if r["note"] and r["ratio"] is None else ""))


def write_csv(directory, family, rows):
    path = os.path.join(directory, f"{family}.csv")
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    os.replace(path + ".tmp", path)
    return path


def plot(directory, family, rows):
    plt = pyplot(PROGRAM)
    rows = [r for r in rows if r["ratio"] is not None]
    if not rows:
        return None
    baselines = list(dict.fromkeys(r["baseline"] for r in rows))
    colours = {b: f"C{i}" for i, b in enumerate(baselines)}
    fig, ax = plt.subplots(figsize=(8, 1.6 + 0.3 * len(rows)), dpi=100, layout="constrained")
    y = list(range(len(rows)))[::-1]
    ratios = [r["ratio"] for r in rows]
    bars = ax.barh(y, ratios, color=[colours[r["baseline"]] for r in rows])
    ax.bar_label(bars, labels=[f"{x:.3g}" for x in ratios], fontsize=7, padding=2)
    ax.set_yticks(y, [r["case"] for r in rows], fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    # A log scale where the ratios span more than a decade (grove vs Python's pytrees), else a
    # linear one from 0, which shows small differences around 1 better.
    if max(ratios) / min(ratios) > 10:
        ax.set_xscale("log")
        ax.set_xlim(min(min(ratios), 1.0) / 1.5, max(max(ratios), 1.0) * 1.6)
        ax.set_xlabel("grove time / baseline time (log scale; < 1: grove faster)")
    else:
        ax.set_xlim(0, max(max(ratios), 1.0) * 1.15)
        ax.set_xlabel("grove time / baseline time (< 1: grove faster)")
    ax.set_title(TITLES[family], fontsize=10)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[b]) for b in baselines]
    ax.legend(handles, baselines, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22),
              ncol=len(baselines), frameon=False)
    ax.grid(axis="x", alpha=0.3, which="both")
    path = os.path.join(directory, f"{family}.png")
    save_png(fig, path, PROGRAM)
    plt.close(fig)
    return path


def plot_dir_problem(path):
    if os.path.lexists(path) and not os.path.isdir(path):
        return f"--plot {path}: not a directory"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(path) and not os.path.isdir(parent):
        return f"--plot {path}: its parent directory {parent} does not exist"
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", required=True, help="directory with the benchmarks' JSON files")
    p.add_argument("--csv", help="directory for the CSV tables (default: --results)")
    p.add_argument("--plot", help="directory for one bar chart of the ratios per family (PNG)")
    args = p.parse_args()
    if not os.path.isdir(args.results):
        raise UsageError(f"{PROGRAM}: --results {args.results}: not a directory")
    csv_dir = args.csv or args.results
    if not os.path.isdir(csv_dir):
        raise UsageError(f"{PROGRAM}: --csv {csv_dir}: not a directory")
    if args.plot is not None:
        problem = plot_dir_problem(args.plot)
        if problem:
            raise UsageError(f"{PROGRAM}: {problem}")
        pyplot(PROGRAM)  # before any table: a missing matplotlib fails first
    notes = []
    families = {"tree": tree_rows(args.results, notes), "random": random_rows(args.results, notes),
                "mlp": mlp_rows(args.results, notes) + jax_rows(args.results, notes),
                "allreduce": allreduce_rows(args.results, notes),
                "precision": precision_rows(args.results, notes),
                "data": data_rows(args.results, notes)}
    for note in notes:
        print(f"note: {note}")
    written = []
    for family, rows in families.items():
        if not rows:
            continue
        print_table(family, rows)
        written.append(write_csv(csv_dir, family, rows))
    if not written:
        raise Failure(f"{PROGRAM}: {args.results}: no benchmark results to report")
    print("\nCSV: " + " ".join(written))
    if args.plot is not None:
        os.makedirs(args.plot, exist_ok=True)
        pngs = [p for p in (plot(args.plot, f, r) for f, r in families.items() if r) if p]
        print("plots: " + " ".join(pngs))


if __name__ == "__main__":
    run(PROGRAM, main)
