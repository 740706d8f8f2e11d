"""numpy is the oracle for grove's .npy and .npz files (grove/data/npy.hpp, npz.hpp).

  grove_reads_numpy   numpy writes every numeric dtype in both orders and byte orders, format
                      versions 1.0, 2.0 and 3.0, shapes of 0 to 4 dimensions and extreme values;
                      grove must read the same values (through its conversions, in numpy's
                      C order, floats compared bit for bit).
  numpy_reads_grove   grove writes every element type and layout; numpy must read the values the
                      shared formulas give, bit for bit, and the files must be the bytes np.save
                      writes for the same arrays.
  npz_both_ways       np.savez and np.savez_compressed read by grove; grove's archives, stored
                      and deflated, read by np.load.
  refusals            what grove does not read (pickles, structured dtypes, strings, datetimes,
                      long doubles, two arrays in one file) is refused with a message that says so.

Usage: data_npy_interop.py DIRECTION DRIVER WORKDIR. Exit 77 (skipped) when numpy is missing.
"""

import io
import math
import os
import shutil
import subprocess
import sys
import zipfile

try:
    import numpy as np
except ImportError:
    print("numpy is not installed: skipped")
    sys.exit(77)

from numpy.lib import format as npformat

DTYPES = ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]


def formula(dtype, shape):
    """The values data_npy_interop.cpp's formula<T> gives, at numpy's C-order index k."""
    k = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
    kind = np.dtype(dtype).kind
    if kind == "b":
        v = k % 3 == 0
    elif kind == "c":
        v = (k - 5) * 0.375 + 1j * (k * 0.5)
    elif kind == "f":
        v = (k - 5) * 0.375
    elif kind == "i":
        v = (k * 37) % 200 - 100
    else:
        v = (k * 37) % 250
    return v.astype(dtype).reshape(shape)


def extremes(dtype):
    kind = np.dtype(dtype).kind
    if kind in "iu":
        info = np.iinfo(dtype)
        return np.array([info.min, info.max, 0, 1], dtype=dtype)
    if kind == "f":
        info = np.finfo(dtype)
        return np.array([np.nan, np.inf, -np.inf, -0.0, info.tiny, info.max, info.smallest_subnormal],
                        dtype=dtype)
    if kind == "c":
        return np.array([complex(np.nan, -0.0), complex(np.inf, 1e-30)], dtype=dtype)
    return np.array([True, False], dtype=dtype)


def run(driver, *args):
    p = subprocess.run([driver, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def grove_print(driver, files):
    """{name: (dtype, shape, fortran, [value tokens])} from the driver's print."""
    out = {}
    for start in range(0, len(files), 200):
        rc, stdout, stderr = run(driver, "print", *files[start:start + 200])
        if rc != 0:
            raise SystemExit(f"data_npy_interop print failed ({rc}): {stderr}")
        lines = stdout.splitlines()
        for i in range(0, len(lines), 3):
            name = lines[i].split(" ", 1)[1]
            dtype, shape, fortran = lines[i + 1].split(" ")
            values = lines[i + 2].split(" ")[1:]
            dims = tuple(int(d) for d in shape.strip("()").split(",") if d)
            out[name] = (dtype, dims, fortran == "1", values)
    return out


def same_float(a, b):
    """Bit for bit, NaN as NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


def check_values(name, array, printed, failures):
    dtype, shape, _, tokens = printed
    if dtype != array.dtype.str:
        failures.append(f"{name}: grove's dtype {dtype}, numpy's {array.dtype.str}")
        return
    if shape != array.shape:
        failures.append(f"{name}: grove's shape {shape}, numpy's {array.shape}")
        return
    flat = np.array(array, order="C").reshape(-1)
    if len(tokens) != flat.size:
        failures.append(f"{name}: grove printed {len(tokens)} values, numpy has {flat.size}")
        return
    kind = array.dtype.kind
    for i, (token, value) in enumerate(zip(tokens, flat)):
        if kind == "b":
            ok = token == ("1" if value else "0")
        elif kind in "iu":
            ok = int(token) == int(value)
        elif kind == "f":
            ok = same_float(float.fromhex(token), float(value))
        else:
            re, im = token.split(":")
            ok = same_float(float.fromhex(re), float(value.real)) and same_float(float.fromhex(im),
                                                                                 float(value.imag))
        if not ok:
            failures.append(f"{name}: element {np.unravel_index(i, array.shape)} is {token} in "
                            f"grove, {value!r} in numpy")
            return


def report(failures, what):
    if failures:
        for f in failures[:40]:
            print("FAIL", f)
        print(f"{len(failures)} failures")
        return 1
    print(f"ok: {what}")
    return 0


def grove_reads_numpy(driver, work):
    files, arrays = [], {}

    def save(name, array, version=None, fortran=False):
        a = np.array(array, order="F" if fortran else "C")  # 0-D stays 0-D
        path = os.path.join(work, name)
        with open(path, "wb") as f:
            if version is None:
                np.save(f, a)
            else:
                npformat.write_array(f, a, version=version)
        files.append(path)
        arrays[name] = a

    for dtype in DTYPES:
        size = np.dtype(dtype).itemsize
        orders = ["|"] if size == 1 else ["<", ">"]
        base = dtype if size == 1 else None
        for order in orders:
            dt = np.dtype(base or order + dtype)
            tag = dtype + ("" if size == 1 else ("le" if order == "<" else "be"))
            for version in [(1, 0), (2, 0), (3, 0)]:
                for fortran in [False, True]:
                    save(f"v{version[0]}_{tag}_{'F' if fortran else 'C'}.npy",
                         formula(dt, (3, 4)), version, fortran)
            for shape in [(5,), (), (2, 3, 4), (2, 1, 3, 2), (0, 3), (1, 4), (4, 1)]:
                for fortran in [False, True]:
                    label = "x".join(map(str, shape)) or "scalar"
                    save(f"s_{tag}_{label}_{'F' if fortran else 'C'}.npy", formula(dt, shape),
                         None, fortran)
            save(f"extremes_{tag}.npy", extremes(dt))
    # A non-contiguous array (np.save copies it to C order) and a 0-D numpy scalar.
    save("strided.npy", np.arange(40, dtype="<f8").reshape(5, 8)[::2, 1::3])
    path = os.path.join(work, "scalar.npy")
    np.save(path, np.float32(2.5))
    files.append(path)
    arrays["scalar.npy"] = np.load(path)

    printed = grove_print(driver, files)
    failures = []
    for name, array in arrays.items():
        if name not in printed:
            failures.append(f"{name}: not printed by grove")
            continue
        check_values(name, array, printed[name], failures)
        # The order grove reports is the file's.
        with open(os.path.join(work, name), "rb") as f:
            version = npformat.read_magic(f)
            _, fortran, _ = npformat._read_array_header(f, version)
        if printed[name][2] != fortran:
            failures.append(f"{name}: grove's fortran_order {printed[name][2]}, the file's {fortran}")
    return report(failures, f"grove read {len(arrays)} files numpy wrote")


WRITTEN = {  # grove's files: (dtype, shape, memory order of the array np.save would be given)
    **{f"m_{d}_col.npy": (d, (3, 4), "F") for d in DTYPES},
    **{f"m_{d}_row.npy": (d, (3, 4), "C") for d in DTYPES},
    "v_f8.npy": ("f8", (5,), "C"),
    "rowvec_f4.npy": ("f4", (1, 4), "C"),
    "empty_f8.npy": ("f8", (0, 3), "F"),
    "column_i4.npy": ("i4", (4, 1), "F"),
    "t3_f4_col.npy": ("f4", (2, 3, 4), "F"),
    "t3_f4_row.npy": ("f4", (2, 3, 4), "C"),
    "t0_f8.npy": ("f8", (), "C"),
    "t4_i2.npy": ("i2", (2, 1, 3, 2), "F"),
}


def expected_written(name):
    dtype, shape, order = WRITTEN[name]
    return np.array(formula(np.dtype(dtype), shape), order=order)  # 0-D stays 0-D


def same_array(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and \
        np.array(a, order="C").tobytes() == np.array(b, order="C").tobytes()


def numpy_reads_grove(driver, work):
    rc, _, stderr = run(driver, "write", work)
    if rc != 0:
        raise SystemExit(f"data_npy_interop write failed ({rc}): {stderr}")
    failures = []
    for name in WRITTEN:
        path = os.path.join(work, name)
        expected = expected_written(name)
        loaded = np.load(path)
        if not same_array(loaded, expected):
            failures.append(f"{name}: numpy read {loaded.dtype} {loaded.shape} {loaded!r}, "
                            f"expected {expected.dtype} {expected.shape} {expected!r}")
        # Byte for byte what np.save writes for the same array.
        buffer = io.BytesIO()
        np.save(buffer, expected)
        with open(path, "rb") as f:
            mine = f.read()
        if mine != buffer.getvalue():
            failures.append(f"{name}: grove's file differs from np.save's "
                            f"({len(mine)} and {len(buffer.getvalue())} bytes; headers "
                            f"{mine[:128]!r} and {buffer.getvalue()[:128]!r})")
    return report(failures, f"numpy read {len(WRITTEN)} files grove wrote, byte for byte np.save's")


def npz_both_ways(driver, work):
    failures = []
    # numpy writes, grove reads.
    arrays = {
        "weights": formula(np.dtype("<f4"), (3, 4)),
        "fortran": np.asfortranarray(formula(np.dtype(">i8"), (2, 5))),
        "scalar": np.array(3.25),
        "empty": np.zeros((0, 2), dtype="<u2"),
        "tensor": formula(np.dtype("<c8"), (2, 3, 2)),
        "flags": formula(np.dtype("|b1"), (7,)),
        "half": formula(np.dtype(">f2"), (2, 2)),
        "dir/inner": formula(np.dtype("<i2"), (3,)),
    }
    for name, save in [("stored.npz", np.savez), ("compressed.npz", np.savez_compressed)]:
        path = os.path.join(work, name)
        save(path, **arrays)
        printed = grove_print(driver, [path])
        if sorted(printed) != sorted(f"{name}:{k}" for k in arrays):
            failures.append(f"{name}: grove's keys {sorted(printed)}")
            continue
        for key, array in arrays.items():
            check_values(f"{name}:{key}", array, printed[f"{name}:{key}"], failures)
    # Positional arrays get numpy's names arr_0, arr_1.
    path = os.path.join(work, "positional.npz")
    np.savez(path, np.arange(3), np.ones((2, 2)))
    if sorted(grove_print(driver, [path])) != ["positional.npz:arr_0", "positional.npz:arr_1"]:
        failures.append("positional.npz: not arr_0 and arr_1")

    # grove writes, numpy reads.
    rc, _, stderr = run(driver, "write", work)
    if rc != 0:
        raise SystemExit(f"data_npy_interop write failed ({rc}): {stderr}")
    expected = {f"m_{d}": expected_written(f"m_{d}_col.npy") for d in DTYPES}
    for name in ["t3_f4_col", "t3_f4_row", "t0_f8", "v_f8", "empty_f8"]:
        expected[name] = expected_written(name + ".npy")
    for name, method in [("arrays.npz", zipfile.ZIP_STORED),
                         ("arrays_compressed.npz", zipfile.ZIP_DEFLATED)]:
        path = os.path.join(work, name)
        with zipfile.ZipFile(path) as z:
            if z.testzip() is not None:
                failures.append(f"{name}: a CRC error")
            methods = {i.compress_type for i in z.infolist()}
            if methods != {method}:
                failures.append(f"{name}: compression {methods}, expected {method}")
        with np.load(path) as loaded:
            if sorted(loaded.files) != sorted(expected):
                failures.append(f"{name}: numpy's keys {sorted(loaded.files)}")
                continue
            for key, array in expected.items():
                if not same_array(loaded[key], array):
                    failures.append(f"{name}:{key}: numpy read {loaded[key]!r}, expected {array!r}")
    return report(failures, "npz archives both ways")


def refusals(driver, work):
    cases = {
        "object.npy": (lambda p: np.save(p, np.array([{"a": 1}, None], dtype=object)),
                       "object array"),
        "structured.npy": (lambda p: np.save(p, np.zeros(3, dtype=[("a", "<f8"), ("b", "<i4")])),
                           "structured dtype"),
        "subarray_field.npy": (lambda p: np.save(p, np.zeros(2, dtype=[("a", "<f4", (3,))])),
                               "structured dtype"),
        "unicode.npy": (lambda p: np.save(p, np.array(["ab", "c"])), "array of strings"),
        "bytes.npy": (lambda p: np.save(p, np.array([b"ab"])), "array of strings"),
        "void.npy": (lambda p: np.save(p, np.zeros(2, dtype="V4")), "raw bytes"),
        "datetime.npy": (lambda p: np.save(p, np.array(["2020-01-01"], dtype="M8[D]")),
                         "datetimes or timedeltas"),
        "timedelta.npy": (lambda p: np.save(p, np.array([5], dtype="m8[s]")),
                          "datetimes or timedeltas"),
        "longdouble.npy": (lambda p: np.save(p, np.zeros(2, dtype=np.longdouble)), "long double"),
        "clongdouble.npy": (lambda p: np.save(p, np.zeros(2, dtype=np.clongdouble)), "long double"),
        "pickle.npz": (lambda p: np.savez(p, ok=np.ones(2), bad=np.array([None], dtype=object)),
                       "entry 'bad.npy': dtype '|O' is an object array"),
    }

    def twice(path):
        with open(path, "wb") as f:
            np.save(f, np.ones(3))
            np.save(f, np.zeros(2))

    cases["twice.npy"] = (twice, "bytes after the data")
    failures = []
    for name, (make, message) in cases.items():
        path = os.path.join(work, name)
        make(path)
        rc, stdout, stderr = run(driver, "refuse", path)
        if rc != 0:
            failures.append(f"{name}: not refused with a format_error ({rc}): {stdout} {stderr}")
        elif message not in stdout:
            failures.append(f"{name}: the message {stdout.strip()!r} does not say {message!r}")
        else:
            print(f"{name}: {stdout.strip()}")
    return report(failures, f"{len(cases)} files refused")


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    direction, driver, work = sys.argv[1:]
    work = os.path.join(work, direction)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return {
        "grove_reads_numpy": grove_reads_numpy,
        "numpy_reads_grove": numpy_reads_grove,
        "npz_both_ways": npz_both_ways,
        "refusals": refusals,
    }[direction](driver, work)


if __name__ == "__main__":
    sys.exit(main())
