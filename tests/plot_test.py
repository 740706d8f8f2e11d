#!/usr/bin/env python3
"""Tests of the pictures: scripts/plot_training.py, scripts/bench_report.py (tables, CSV, bar
charts) and train_mlp --plot. Each case runs the real script or program on tiny inputs in a
fresh work directory and checks what it wrote: a PNG is checked byte by byte with the standard
library (signature, IHDR chunk and its CRC, a sane width and height), tables against ratios
computed here from the fixture's numbers, and every refusal for its exit status (1 or 2, never a
traceback), its message and that nothing on disk changed.

    plot_test.py CASE WORK_DIR [TRAIN_MLP [DATA_DIR]]

Cases that draw exit 77 (ctest's SKIP_RETURN_CODE) when matplotlib is missing.
"""
import csv
import json
import os
import stat
import struct
import subprocess
import sys
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
PLOT_TRAINING = os.path.join(ROOT, "scripts", "plot_training.py")
BENCH_REPORT = os.path.join(ROOT, "scripts", "bench_report.py")
SKIP = 77

METRICS = ("epoch,train_loss,test_loss,test_accuracy,epoch_seconds\n"
           "1,0.612345,0.501234,0.812300,1.234\n"
           "2,0.432100,0.451200,0.841200,1.201\n"
           "3,0.390000,0.430000,0.850000,\n")


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def has_matplotlib():
    return subprocess.run([PYTHON, "-c", "import matplotlib"], capture_output=True).returncode == 0


def png_size(path):
    """(width, height) of a valid PNG file; fails the test otherwise."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: no PNG signature: {data[:8]!r}")
    length, kind = struct.unpack(">I4s", data[8:16])
    check(kind == b"IHDR" and length == 13, f"{path}: the first chunk is {kind!r} ({length} bytes)")
    ihdr = data[16:29]
    (crc,) = struct.unpack(">I", data[29:33])
    check(zlib.crc32(b"IHDR" + ihdr) == crc, f"{path}: IHDR's CRC does not match")
    width, height, depth, colour = struct.unpack(">IIBB", ihdr[:10])
    check(depth == 8 and colour in (2, 6), f"{path}: bit depth {depth}, colour type {colour}")
    check(data.endswith(b"IEND\xaeB`\x82"), f"{path}: no IEND chunk at the end")
    check(100 <= width <= 4000 and 100 <= height <= 4000, f"{path}: {width} x {height} pixels")
    return width, height


def run(args, env=None):
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    return r.returncode, r.stdout, r.stderr


def snapshot(directory):
    """Names, kinds, sizes and modification times of everything under `directory`."""
    out = {}
    for base, dirs, files in os.walk(directory):
        for name in dirs + files:
            p = os.path.join(base, name)
            st = os.lstat(p)
            out[os.path.relpath(p, directory)] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return out


def expect_refusal(args, statuses, words, work, env=None):
    """`args` must exit with one of `statuses`, say all of `words` on stderr, print no Python
    traceback and leave `work` as it was."""
    before = snapshot(work)
    status, out, err = run(args, env)
    check(status in statuses, f"{args}: exit status {status}, expected {statuses}\n{out}{err}")
    check("Traceback" not in err, f"{args}: a traceback:\n{err}")
    for w in words:
        check(w in err, f"{args}: stderr does not say {w!r}:\n{err}")
    check(snapshot(work) == before, f"{args}: the work directory changed")
    return err


# --- plot_training.py --------------------------------------------------------------------------

def case_training(work):
    if not has_matplotlib():
        return SKIP
    metrics = os.path.join(work, "run.csv")
    with open(metrics, "w") as f:
        f.write(METRICS)
    png = os.path.join(work, "run.png")
    with open(png, "w") as f:
        f.write("an old file that the picture replaces\n")
    status, out, err = run([PYTHON, PLOT_TRAINING, "--metrics", metrics, "--out", png, "--title", "t"])
    check(status == 0, f"plot_training.py failed ({status}):\n{out}{err}")
    width, height = png_size(png)
    check(width > height, f"two panels side by side, yet {width} x {height}")
    check(sorted(os.listdir(work)) == ["run.csv", "run.png"], f"left behind: {os.listdir(work)}")
    check(stat.S_IMODE(os.stat(png).st_mode) & 0o044 == 0o044 & ~current_umask(),
          "the PNG has mkstemp's private mode, not a plain file's")
    # Through a link to a regular file: the file is replaced, the link stays a link.
    os.symlink("run.png", os.path.join(work, "link.png"))
    status, out, err = run([PYTHON, PLOT_TRAINING, "--metrics", metrics, "--out",
                            os.path.join(work, "link.png")])
    check(status == 0, f"through a link: {status}\n{err}")
    check(os.path.islink(os.path.join(work, "link.png")), "the link was replaced by a file")
    png_size(png)
    # --check succeeds where matplotlib is.
    check(run([PYTHON, PLOT_TRAINING, "--check"])[0] == 0, "--check failed with matplotlib there")
    return 0


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def case_training_hostile(work):
    metrics = os.path.join(work, "run.csv")
    with open(metrics, "w") as f:
        f.write(METRICS)
    sub = os.path.join(work, "a_directory")
    os.mkdir(sub)
    with open(os.path.join(sub, "keep.txt"), "w") as f:
        f.write("kept\n")
    fifo = os.path.join(work, "fifo")
    os.mkfifo(fifo)
    os.symlink("nowhere.png", os.path.join(work, "dangling.png"))
    base = [PYTHON, PLOT_TRAINING, "--metrics", metrics, "--out"]
    expect_refusal(base + [sub], (2,), ["plot_training.py: ", sub, "is a directory"], work)
    expect_refusal(base + [fifo], (2,), ["special file"], work)
    expect_refusal(base + [os.path.join(work, "dangling.png")], (2,), ["link to nothing"], work)
    missing = os.path.join(work, "missing", "run.png")
    expect_refusal(base + [missing], (2,), ["does not exist"], work)
    check(not os.path.exists(os.path.join(work, "missing")), "the missing directory was created")
    null = os.stat("/dev/null")
    expect_refusal(base + ["/dev/null"], (2,), ["/dev/null", "special file"], work)
    check(stat.S_ISCHR(os.stat("/dev/null").st_mode) and os.stat("/dev/null").st_rdev == null.st_rdev,
          "/dev/null is no longer the null device")
    # Inputs that are not train_mlp's metrics: a clear failure, nothing written.
    out = os.path.join(work, "out.png")
    for name, text, words in [("empty.csv", "epoch,train_loss,test_loss,test_accuracy\n", ["no epochs"]),
                              ("other.csv", "a,b\n1,2\n", ["not train_mlp's metrics", "train_loss"]),
                              ("nan.csv", "epoch,train_loss,test_loss,test_accuracy\n1,nan,1,0.5\n",
                               ["not finite"]),
                              ("text.csv", "epoch,train_loss,test_loss,test_accuracy\n1,x,1,0.5\n",
                               ["not a number"])]:
        p = os.path.join(work, name)
        with open(p, "w") as f:
            f.write(text)
        if has_matplotlib():
            expect_refusal([PYTHON, PLOT_TRAINING, "--metrics", p, "--out", out], (1,), words, work)
    expect_refusal([PYTHON, PLOT_TRAINING, "--metrics", os.path.join(work, "none.csv"), "--out", out],
                   (1, 2), ["none.csv"], work)
    # Without matplotlib (python -S: no site packages): a message naming the package.
    expect_refusal([PYTHON, "-S", PLOT_TRAINING, "--check"], (1,), ["python3-matplotlib"], work)
    expect_refusal([PYTHON, "-S", PLOT_TRAINING, "--metrics", metrics, "--out", out], (1,),
                   ["matplotlib is missing"], work)
    return 0


# --- bench_report.py ---------------------------------------------------------------------------

def gb(*benchmarks):
    """A Google Benchmark JSON document with these benchmark entries."""
    return {"context": {"num_cpus": 2, "load_avg": [1.0, 1.0, 1.0]},
            "benchmarks": [dict(run_type="iteration", iterations=10, **b) for b in benchmarks]}


def bench_fixture(results, blas_kind):
    docs = {
        "tree.json": gb({"name": "BM_map_tuple_grove", "real_time": 40.0, "cpu_time": 30.0, "time_unit": "ns"},
                        {"name": "BM_map_tuple_hand", "real_time": 80.0, "cpu_time": 60.0, "time_unit": "ns"},
                        {"name": "BM_flatten/resnet50", "real_time": 16.0, "cpu_time": 15.0, "time_unit": "us"}),
        "random.json": gb({"name": "std_into/mt19937_normal_float", "real_time": 100.0, "cpu_time": 100.0,
                           "time_unit": "ms", "samples/s": 1e8},
                          {"name": "grove_into_float/normal_float/threads:1/real_time", "real_time": 25.0,
                           "cpu_time": 25.0, "time_unit": "ms", "samples/s": 4e8, "x_std": 4.0}),
        "nn.json": gb({"name": "step_adam/batch:128/threads:1/min_time:1.000/manual_time", "real_time": 5.5,
                       "cpu_time": 5.6, "time_unit": "ms", "GEMMs_ms": 5.0, "step/GEMMs": 1.1}),
        "parallel.json": gb({"name": "allreduce/mpi/iterations:200/manual_time", "real_time": 2.2,
                             "cpu_time": 2.2, "time_unit": "ms", "pytree_ms": 2.1, "bare_ms": 2.0,
                             "overhead_%": 5.0}),
    }
    docs["tree_torch.json"] = {"torch": "1.13", "benchmarks": [
        {"name": "flatten/resnet50", "cpu_time": 1.5e6, "time_unit": "ns", "leaves": 1116}]}
    blas = {"kind": blas_kind, "libraries": ["/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"],
            "kernel": "", "config": ""}
    if blas_kind == "openblas":
        blas.update(libraries=["/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"],
                    kernel="Zen", config="OpenBLAS 0.3.21 DYNAMIC_ARCH")
    docs["nn_torch.json"] = {"torch": "1.13", "blas": blas, "rows": [
        {"batch": 128, "threads": 2, "grove_ms": 3.0, "torch_ms": 4.0, "torch_setting": "torch 2 + BLAS 1 threads"}]}
    docs["nn_jax.json"] = {"jax": "0.10.2", "jaxlib": "0.10.2", "optax": "0.2.8", "rows": [
        {"batch": 128, "threads": 2, "grove_ms": 3.0, "jax_ms": 5.0, "rounds": 3}]}
    docs["main_jax.json"] = {"epochs": 15, "grove": [{"seconds": 9.0, "accuracy": 0.9024}],
                             "jax": [{"seconds": 10.0, "accuracy": 0.8990}], "grove_s": 9.0, "jax_s": 10.0}
    for name, doc in docs.items():
        with open(os.path.join(results, name), "w") as f:
            json.dump(doc, f)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def close(a, b):
    return abs(float(a) - b) <= 1e-9 * max(1.0, abs(b))


def case_bench(work):
    if not has_matplotlib():
        return SKIP
    results = os.path.join(work, "results")
    os.mkdir(results)
    bench_fixture(results, "openblas")
    plots = os.path.join(work, "plots")  # created by the script (its parent exists)
    status, out, err = run([PYTHON, BENCH_REPORT, "--results", results, "--plot", plots])
    check(status == 0, f"bench_report.py failed ({status}):\n{out}{err}")
    for family in ["tree", "random", "mlp", "allreduce"]:
        png_size(os.path.join(plots, f"{family}.png"))
    check(sorted(os.listdir(plots)) == ["allreduce.png", "mlp.png", "random.png", "tree.png"],
          f"plots: {os.listdir(plots)}")
    # The ratios, from the fixture's numbers: grove's time over the baseline's.
    tree = {r["case"]: r for r in read_csv(os.path.join(results, "tree.csv"))}
    check(close(tree["tree_map, tuple of 4 Eigen matrices"]["ratio"], 30 / 60), f"tree: {tree}")
    check(close(tree["tree_map, tuple of 4 Eigen matrices"]["grove"], 0.030), "ns -> us")
    check(close(tree["flatten, resnet50"]["ratio"], 15.0 / 1500.0), f"tree vs torch: {tree}")
    (rnd,) = read_csv(os.path.join(results, "random.csv"))
    check(close(rnd["ratio"], 0.25) and close(rnd["grove"], 25.0) and close(rnd["baseline_value"], 100.0),
          f"random: {rnd}")
    mlp = read_csv(os.path.join(results, "mlp.csv"))
    check(len(mlp) == 4 and close(mlp[0]["ratio"], 1.1) and close(mlp[0]["baseline_value"], 5.0), f"mlp: {mlp}")
    check(close(mlp[1]["ratio"], 0.75) and mlp[1]["baseline"] == "PyTorch", f"mlp vs torch: {mlp}")
    check(close(mlp[2]["ratio"], 0.6) and mlp[2]["baseline"] == "JAX", f"mlp vs JAX: {mlp}")
    check(close(mlp[3]["ratio"], 0.9) and mlp[3]["unit"] == "s" and "0.9024" in mlp[3]["note"],
          f"the main job vs JAX: {mlp}")
    (ar,) = read_csv(os.path.join(results, "allreduce.csv"))
    check(close(ar["ratio"], 1.05), f"allreduce: {ar}")
    check("OpenBLAS, kernel Zen" in out, f"the BLAS is not printed:\n{out}")
    check("0.750" in out and "0.500" in out, f"ratios missing from the tables:\n{out}")

    # The precision family: the products' fastest repetition (best_ms), and the float32 products
    # once more with both libraries held to AVX2 (precision_avx2.json), in rows of their own.
    def products(impl, *best, label):
        return [{"name": f"precision_products/{impl}/batch:128/threads:1", "real_time": 9.0,
                 "cpu_time": 9.0, "time_unit": "ms", "best_ms": b, "label": label} for b in best]
    precision = gb(*products("grove_f32", 2.5, 2.4, label="grove's AVX-512 kernel"),
                   *products("onednn_f32", 2.0, label="oneDNN brg:avx512_core"))
    precision["context"].update(grove_kernel="grove's AVX-512 kernel", onednn_isa="avx512_core_amx")
    capped = gb(*products("grove_f32", 3.0, label="grove's AVX2 kernel"),
                *products("onednn_f32", 4.0, label="oneDNN gemm:jit"))
    capped["context"].update(grove_kernel="grove's AVX2 kernel", onednn_isa="avx2",
                             onednn_max_cpu_isa="AVX2")
    for name, doc in (("precision.json", precision), ("precision_avx2.json", capped)):
        with open(os.path.join(results, name), "w") as f:
            json.dump(doc, f)
    status, out, err = run([PYTHON, BENCH_REPORT, "--results", results])
    check(status == 0, f"bench_report.py failed ({status}):\n{out}{err}")
    prec = {r["case"]: r for r in read_csv(os.path.join(results, "precision.csv"))}
    check(sorted(prec) == ["grove f32 / oneDNN f32, batch 128, 1 thread(s)",
                           "grove f32 / oneDNN f32, batch 128, 1 thread(s), both on AVX2"],
          f"precision rows: {sorted(prec)}")
    check(close(prec["grove f32 / oneDNN f32, batch 128, 1 thread(s)"]["ratio"], 2.4 / 2.0),
          f"precision: {prec}")
    check(close(prec["grove f32 / oneDNN f32, batch 128, 1 thread(s), both on AVX2"]["ratio"],
                3.0 / 4.0), f"precision, AVX2: {prec}")
    check("grove's AVX2 kernel" in out and "ONEDNN_MAX_CPU_ISA=AVX2" in out,
          f"the capped run's kernels are not named:\n{out}")
    for name in ("precision.json", "precision_avx2.json", "precision.csv"):
        os.remove(os.path.join(results, name))

    # PyTorch on the reference BLAS: its row has no ratio, and the report says why.
    bench_fixture(results, "reference")
    status, out, err = run([PYTHON, BENCH_REPORT, "--results", results])
    check(status == 0, f"bench_report.py failed ({status}):\n{out}{err}")
    mlp = read_csv(os.path.join(results, "mlp.csv"))
    check(mlp[1]["ratio"] == "" and "reference" in mlp[1]["note"], f"a ratio against the reference BLAS: {mlp}")
    check("refused" in out and "reference BLAS" in out, f"no refusal printed:\n{out}")
    check("0.750" not in out, f"the refused ratio is printed anyway:\n{out}")
    return 0


def case_bench_hostile(work):
    results = os.path.join(work, "results")
    os.mkdir(results)
    bench_fixture(results, "openblas")
    a_file = os.path.join(work, "a_file")
    with open(a_file, "w") as f:
        f.write("not a directory\n")
    base = [PYTHON, BENCH_REPORT, "--results", results, "--plot"]
    expect_refusal(base + [a_file], (2,), ["bench_report.py: ", "not a directory"], work)
    expect_refusal(base + ["/dev/null"], (2,), ["/dev/null", "not a directory"], work)
    expect_refusal(base + [os.path.join(work, "no", "plots")], (2,), ["does not exist"], work)
    expect_refusal([PYTHON, BENCH_REPORT, "--results", os.path.join(work, "none")], (2,),
                   ["not a directory"], work)
    with open(os.path.join(results, "nn.json"), "w") as f:
        f.write("{ not json")
    expect_refusal([PYTHON, BENCH_REPORT, "--results", results], (1,), ["nn.json", "not readable as JSON"], work)
    empty = os.path.join(work, "empty")
    os.mkdir(empty)
    expect_refusal([PYTHON, BENCH_REPORT, "--results", empty], (1,), ["no benchmark results"], work)
    return 0


# --- train_mlp --plot --------------------------------------------------------------------------

def case_train_mlp_hostile(work, train_mlp):
    # An existing --data directory: the outputs are checked before the data is read.
    data = os.path.join(work, "data")
    os.mkdir(data)
    sub = os.path.join(work, "a_directory")
    os.mkdir(sub)
    base = [train_mlp, "--data", data, "--plot"]
    expect_refusal(base + [sub], (1, 2), ["train_mlp: --plot " + sub, "is a directory"], work)
    expect_refusal(base + ["/dev/null"], (1, 2), ["--plot /dev/null", "special file"], work)
    check(stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null is no longer a device")
    missing = os.path.join(work, "missing", "run.png")
    expect_refusal(base + [missing], (1, 2), ["--plot " + missing, "cannot write in the directory"], work)
    check(not os.path.exists(os.path.join(work, "missing")), "the missing directory was created")
    png = os.path.join(work, "run.png")
    env = dict(os.environ, GROVE_PYTHON=os.path.join(work, "no-python3"))
    expect_refusal(base + [png], (1, 2), ["--plot " + png, "cannot run", "python3-matplotlib"], work, env)
    env = dict(os.environ, GROVE_PLOT_SCRIPT=os.path.join(work, "no_script.py"))
    expect_refusal(base + [png], (1, 2), ["the plotting script", "GROVE_PLOT_SCRIPT"], work, env)
    return 0


def case_train_mlp_plot(work, train_mlp, data):
    if not has_matplotlib():
        return SKIP
    png = os.path.join(work, "curves.png")
    status, out, err = run([train_mlp, "--data", data, "--layers", "784,32,10", "--batch-size", "1000",
                            "--epochs", "2", "--threads", "1", "--plot", png])
    check(status == 0, f"train_mlp --plot failed ({status}):\n{out}{err}")
    check(f"drew the training curves to {png}" in out, f"no line about the plot:\n{out}")
    png_size(png)
    check(os.listdir(work) == ["curves.png"], f"left behind: {os.listdir(work)}")
    return 0


def main():
    case, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    for name in os.listdir(work):  # a fresh directory per run
        p = os.path.join(work, name)
        subprocess.run(["rm", "-rf", "--", p], check=True)
    cases = {"training": case_training, "training_hostile": case_training_hostile,
             "bench": case_bench, "bench_hostile": case_bench_hostile,
             "train_mlp_hostile": case_train_mlp_hostile, "train_mlp_plot": case_train_mlp_plot}
    status = cases[case](work, *sys.argv[3:])
    if status == SKIP:
        print("skipped: /usr/bin/python3 has no matplotlib (Debian: python3-matplotlib)")
    else:
        print(f"{case}: passed")
    sys.exit(status)


if __name__ == "__main__":
    main()
