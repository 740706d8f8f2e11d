#!/usr/bin/env python3
"""grove checkpoints <-> Python, with nothing but json and numpy.

  checkpoint_interop.py python_reads_grove HELPER DIR
      HELPER (tests/checkpoint_interop.cpp) saves ckpt_test::sample(); this script parses the
      safetensors file by hand and checks the layout and every value, bit for bit.
  checkpoint_interop.py grove_reads_python HELPER DIR
      this script writes the same values the way a Python user would (any tensor order, no
      padding, unaligned tensors, metadata last); HELPER loads them into grove and checks them.

Exits 77 (ctest's SKIP_RETURN_CODE) when numpy is missing.
"""
import json
import os
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print(f"SKIP: numpy is not installed for {sys.executable} (Debian: apt-get install python3-numpy)")
    sys.exit(77)

DTYPES = {"BOOL": "?", "U8": "u1", "I8": "i1", "I16": "<i2", "U16": "<u2", "I32": "<i4", "U32": "<u4",
          "I64": "<i8", "U64": "<u8", "F32": "<f4", "F64": "<f8"}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def expected():
    """The values of ckpt_test::sample() (tests/checkpoint_fixture.hpp), as numpy arrays."""
    f32_max_and_nan = np.array([0x7F7FFFFF, 0x7FC00001], dtype=np.uint32).view(np.float32)
    return {
        "layers/0/w": np.array([[1.5, -2.25, 3.0], [0.0, -0.0, np.float32(1e-45)]], dtype=np.float32),
        "layers/0/b": np.array([0.5, -1.0], dtype=np.float32),
        "layers/1/w": np.array([[np.inf, -np.inf]], dtype=np.float32),
        "layers/1/b": f32_max_and_nan,
        "f64": np.array([[0.1, -1e300, 3.0], [4.0, 5e-324, 6.25]], dtype=np.float64),
        "i32": np.array([[-2**31, 2**31 - 1], [0, -1], [7, 42]], dtype=np.int32),
        "i64": np.array([-2**63, 2**63 - 1, 0, -5], dtype=np.int64),
        "u32": np.array([0, 2**32 - 1, 123456789], dtype=np.uint32),
        "u8": np.array([[0, 1, 255], [128, 7, 9]], dtype=np.uint8),
        "fixed": np.array([[1, 2], [3, 4]], dtype=np.float32),
        "f32_scalar": np.array(3.25, dtype=np.float32),
        "f64_scalar": np.array(-0.125, dtype=np.float64),
        "step": np.array(1234567890123, dtype=np.int64),
        "i32_scalar": np.array(-7, dtype=np.int32),
        "u8_scalar": np.array(200, dtype=np.uint8),
        "flag": np.array(True),
        "mask": np.array([True, False, True]),
        "key": np.array([0, 42], dtype=np.uint32),
        "old_key": np.array([0xDEADBEEF, 12345], dtype=np.uint32),
        "named/alpha": np.array([1, 2, 3], dtype=np.float32),
        "named/beta": np.zeros((0,), dtype=np.float32),
    }


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def read_safetensors(path):
    """(header, {name: array}) of a safetensors file, by the specification."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    text = raw[8:8 + n]
    header = json.loads(text)
    data = raw[8 + n:]
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = np.dtype(DTYPES[info["dtype"]])
        count = int(np.prod(info["shape"], dtype=np.int64))
        if count * dtype.itemsize != end - begin:
            fail(f"{name}: shape {info['shape']} does not fill data_offsets {info['data_offsets']}")
        arrays[name] = np.frombuffer(data, dtype=dtype, count=count, offset=begin).reshape(info["shape"])
    return raw, n, header, arrays


def python_reads_grove(helper, workdir):
    path = os.path.join(workdir, "from_grove.safetensors")
    subprocess.run([helper, "write", path], check=True)
    raw, n, header, arrays = read_safetensors(path)

    # The header: JSON starting with '{', padded with spaces so that the data is 8-byte aligned.
    if raw[8:9] != b"{" or (8 + n) % 8 != 0 or raw[8:8 + n].rstrip(b" ")[-1:] != b"}":
        fail("the header is not '{...}' padded with spaces to a multiple of 8")
    # The tensors tile the data, each aligned for its dtype.
    ranges = sorted(tuple(v["data_offsets"]) for k, v in header.items() if k != "__metadata__")
    covered = 0
    for begin, end in ranges:
        if begin != covered:
            fail(f"data_offsets leave a hole or overlap at {begin}")
        covered = end
    if covered != len(raw) - 8 - n:
        fail("the tensors do not cover the data exactly")
    for name, info in header.items():
        if name != "__metadata__" and (8 + n + info["data_offsets"][0]) % np.dtype(DTYPES[info["dtype"]]).itemsize:
            fail(f"{name} is not aligned in the file")
    # Tensors are listed in the tree's leaf order.
    if [k for k in header if k != "__metadata__"] != list(expected()):
        fail(f"tensor order {list(header)}")

    want = expected()
    if set(arrays) != set(want):
        fail(f"tensors {sorted(arrays)} != {sorted(want)}")
    for name, value in want.items():
        if not same_bits(arrays[name], value):
            fail(f"{name}: got {arrays[name]!r} ({arrays[name].dtype}), expected {value!r} ({value.dtype})")

    meta = header["__metadata__"]
    version = meta.get("grove.version", "")
    if len(version.split(".")) != 3 or not all(p.isdigit() for p in version.split(".")):
        fail(f"grove.version {version!r}")
    if not meta.get("grove.treedef", "").startswith("PyTreeDef(CustomNode(Sample[()], [[CustomNode(Layer[()], [*, *])"):
        fail(f"grove.treedef {meta.get('grove.treedef')!r}")
    if meta.get("grove.key_layout:key") != "partitionable" or meta.get("grove.key_layout:old_key") != "legacy":
        fail(f"key layouts in {meta}")
    if meta.get("source") != "grove" or meta.get("note") != "h\u00e9llo \u2713":
        fail(f"user metadata in {meta}")
    print(f"OK: numpy read {len(arrays)} tensors and the metadata of a grove checkpoint, bit for bit")


def write_safetensors(path, tensors, metadata, order):
    """Writes like a hand-rolled Python writer: tensors in `order`, no header padding."""
    header, chunks, offset = {}, [], 0
    for name in order:
        array = np.asarray(tensors[name])  # (np.ascontiguousarray would make a 0-d array 1-d)
        little = array.astype(array.dtype.newbyteorder("<"))
        blob = little.tobytes(order="C")
        header[name] = {"dtype": NAMES[little.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        chunks.append(blob)
        offset += len(blob)
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    if (8 + len(text)) % 8 == 0:
        text += b" "  # keep the data unaligned, as nothing in the format forbids
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def grove_reads_python(helper, workdir):
    want = expected()
    # One-byte tensors first, so that the wider ones land at odd offsets.
    order = ["u8_scalar", "flag", "u8", "mask"] + [k for k in reversed(list(want)) if k not in
                                                   ("u8_scalar", "flag", "u8", "mask")]
    # No layout for "key": grove keeps the tree's (partitionable); "old_key" says legacy.
    metadata = {"source": "python", "format": "np", "grove.key_layout:old_key": "legacy"}
    path = os.path.join(workdir, "from_python.safetensors")
    write_safetensors(path, want, metadata, order)
    run = subprocess.run([helper, "read", path], capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"grove could not load the file Python wrote:\n{run.stdout}{run.stderr}")
    if json.loads(run.stdout) != {"source": "python", "format": "np"}:
        fail(f"grove returned the metadata {run.stdout!r}")

    # A file whose f64 has the transposed shape: grove names the tensor and both shapes.
    bad = dict(want)
    bad["f64"] = want["f64"].T.copy()
    path = os.path.join(workdir, "from_python_bad.safetensors")
    write_safetensors(path, bad, metadata, order)
    run = subprocess.run([helper, "read", path], capture_output=True, text=True)
    expected_error = 'tensor "f64" (key path .f64): shape [3, 2] in the file, [2, 3] in the tree'
    if run.returncode == 0 or expected_error not in run.stderr:
        fail(f"grove's error for a transposed tensor: {run.stderr!r}")
    print(f"OK: grove loaded {len(want)} tensors written by numpy, bit for bit, and named a wrong shape")


def python_doc_snippet(helper, workdir):
    """The read() and write() of docs/checkpoint.md, run against grove."""
    doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "checkpoint.md")
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    begin = text.index("```python\n") + len("```python\n")
    code = text[begin:text.index("```", begin)]
    snippet = {}
    exec(compile(code, "docs/checkpoint.md", "exec"), snippet)

    path = os.path.join(workdir, "doc_from_grove.safetensors")
    subprocess.run([helper, "write", path], check=True)
    arrays, meta = snippet["read"](path)
    want = expected()
    if set(arrays) != set(want) or not all(same_bits(arrays[k], want[k]) for k in want):
        fail("the documented read() does not give the expected arrays")
    if meta.get("source") != "grove":
        fail(f"the documented read() gives the metadata {meta}")

    path = os.path.join(workdir, "doc_from_python.safetensors")
    snippet["write"](path, want, {"source": "python", "grove.key_layout:old_key": "legacy"})
    run = subprocess.run([helper, "read", path], capture_output=True, text=True)
    if run.returncode != 0 or json.loads(run.stdout) != {"source": "python"}:
        fail(f"grove could not load what the documented write() wrote:\n{run.stdout}{run.stderr}")
    print("OK: the documented read() and write() work with grove")


def main():
    directions = {"python_reads_grove": python_reads_grove, "grove_reads_python": grove_reads_python,
                  "python_doc_snippet": python_doc_snippet}
    if len(sys.argv) != 4 or sys.argv[1] not in directions:
        print(__doc__)
        sys.exit(2)
    _, direction, helper, workdir = sys.argv
    os.makedirs(workdir, exist_ok=True)
    directions[direction](helper, workdir)


if __name__ == "__main__":
    main()
