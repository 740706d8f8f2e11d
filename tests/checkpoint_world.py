#!/usr/bin/env python3
"""Files from the world into grove, and grove's 16-bit floats back out: json and numpy only.

The writer here follows the safetensors specification (8-byte little-endian header length, a
JSON header of {name: {dtype, shape, data_offsets}} and string __metadata__, then the data), not
grove's code, and writes what PyTorch and Hugging Face tools produce and grove's own writer never
does: torch-style names, F16/BF16 (NaN, inf, subnormals, -0), dtypes grove cannot load (F8_E4M3,
C64, F4), extra entries, data in an order unrelated to the header's, unaligned offsets.

  checkpoint_world.py world HELPER DIR    grove (tests/checkpoint_world.cpp) loads such a file
      with rename and strict=false: values exact (numpy's own F16 conversion is the oracle), the
      report exact; strictly: refused, listing the names, the tree untouched; inspect lists every
      dtype; a tensor of a dtype its leaf cannot hold is refused by name.
  checkpoint_world.py layouts HELPER DIR  a torch nn.Sequential state_dict and a Flax tree of Dense
      modules ((in, out) kernels) load into grove's dense parameters through
      io::torch_sequential_names / io::flax_dense_names and io::flax_kernels: element (i, j) of
      grove's w equals numpy's weight[i, j] and kernel[j, i].
  checkpoint_world.py tensors HELPER DIR  N-D tensors (3-D F32, 4-D F16 with special values, 3-D
      BF16, a 3-D F32 tensor at an unaligned offset, 1-D, 0-D, 2-D, 3-D I16) load into
      column-major and row-major Eigen::Tensor leaves and Eigen::TensorFixedSize leaves: element
      (i, j, k) of each is numpy's a[i, j, k] (the helper reads them through Eigen's indexing);
      loading into leaves of another rank or other dimensions is refused naming the tensor and
      both shapes, the leaf untouched. Then grove writes tensors of both storage orders, and
      numpy reads back their shapes and values.
  checkpoint_world.py half HELPER DIR     grove writes F16/BF16 (Eigen::half / bfloat16 leaves and
      the float-rounding save option); numpy reads them through uint16 views and compares with its
      own float32 -> float16 rounding and an integer round-to-nearest-even for BF16.

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


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def u16(bits):
    return np.array(bits, dtype="<u2")


# Each tensor: (name, dtype, shape, raw little-endian bytes).
def world_tensors():
    f16 = lambda bits, shape: ("F16", shape, u16(bits).tobytes())
    bf16 = lambda bits, shape: ("BF16", shape, u16(bits).tobytes())
    return {
        # 0, -0, 1, inf, -inf, a quiet NaN
        "model.layers.0.weight": f16([0x0000, 0x8000, 0x3C00, 0x7C00, 0xFC00, 0x7E00], [2, 3]),
        # the smallest subnormal, minus the largest subnormal
        "model.layers.0.bias": f16([0x0001, 0x83FF], [2]),
        # 1, -0, inf, -inf, a BF16 subnormal, a NaN with a payload
        "model.layers.1.weight": bf16([0x3F80, 0x8000, 0x7F80, 0xFF80, 0x0001, 0x7FC1], [3, 2]),
        "model.layers.1.bias": bf16([0x4049, 0xC2F7, 0x0080], [3]),
        # the largest finite, the smallest normal, 1/3, a negative NaN, a NaN payload, ...
        "model.wide": f16([0x7BFF, 0x0400, 0x3555, 0xFE00, 0x7E01, 0x3E00, 0xC000, 0x0200,
                           0x8001, 0x5640, 0x1234, 0xABCD], [3, 4]),
        "model.half": f16([0x3C00, 0xBC00, 0x0001, 0x7C00, 0x7D00, 0x8000], [2, 3]),
        "model.counts": ("I16", [3], np.array([-32768, 32767, -1], dtype="<i2").tobytes()),
        "model.ids": ("U8", [3], np.array([0, 255, 17], dtype="u1").tobytes()),
        "model.scale": ("F32", [], np.array(0.1, dtype="<f4").tobytes()),
        # skipped by the rename (torch's BatchNorm buffer)
        "model.bn.num_batches_tracked": ("I64", [], np.array(12, dtype="<i8").tobytes()),
        # unexpected: no leaf
        "model.extra.running_mean": ("F32", [4], np.arange(4, dtype="<f4").tobytes()),
        "fp8_scales": ("F8_E4M3", [3], bytes([0x38, 0x40, 0xB8])),
        "rotation": ("C64", [2], np.array([1 + 2j, -3j], dtype="<c8").tobytes()),
        "packed": ("F4", [4], bytes([0x21, 0x43])),  # four 4-bit elements in two bytes
    }


def write_file(path, tensors, header_order, data_order, metadata, metadata_at):
    """A safetensors file whose header lists tensors in `header_order` (metadata at position
    `metadata_at`) and whose data holds them in `data_order`, with a header length that leaves the
    data unaligned."""
    offsets, blobs, offset = {}, [], 0
    for name in data_order:
        blob = tensors[name][2]
        offsets[name] = [offset, offset + len(blob)]
        blobs.append(blob)
        offset += len(blob)
    entries = []
    for name in header_order:
        dtype, shape, _ = tensors[name]
        entries.append((name, {"dtype": dtype, "shape": shape, "data_offsets": offsets[name]}))
    entries.insert(metadata_at, ("__metadata__", metadata))
    text = json.dumps(dict(entries)).encode()
    if (8 + len(text)) % 2 == 0:
        text += b" "  # an odd data start: nothing wider than a byte is aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def hex_of(array):
    """Each element's bits, as the helper prints them."""
    width = array.dtype.itemsize
    ints = array.reshape(-1).view({2: "<u2", 4: "<u4", 8: "<u8"}[width])
    return [format(int(v), f"0{2 * width}x") for v in ints]


def from_f16(raw, to):
    return np.frombuffer(raw, dtype="<f2").astype(to)  # numpy's conversion: the oracle


def from_bf16(raw, to):
    bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return bits.view(np.float32).astype(to)


def expected_world(t):
    raw = lambda name: t[name][2]
    return {
        "layers/0/w": hex_of(from_f16(raw("model.layers.0.weight"), np.float32)),
        "layers/0/b": hex_of(from_f16(raw("model.layers.0.bias"), np.float32)),
        "layers/1/w": hex_of(from_bf16(raw("model.layers.1.weight"), np.float32)),
        "layers/1/b": hex_of(from_bf16(raw("model.layers.1.bias"), np.float32)),
        "wide": hex_of(from_f16(raw("model.wide"), np.float64)),
        "half": hex_of(np.frombuffer(raw("model.half"), dtype="<f2")),
        "counts": [-32768, 32767, -1],
        "ids": [0, 255, 17],
        "scale": hex_of(np.array([np.float32(0.1)], dtype=np.float64)),
        "not_in_file": hex_of(np.full(2, 7.0, dtype=np.float32)),  # kept
    }


def run(helper, *args):
    result = subprocess.run([helper, *args], capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr


def world(helper, workdir):
    t = world_tensors()
    names = list(t)
    # Header order: reversed with the metadata in the middle; data order: one-byte tensors first
    # (so the rest start at odd offsets), then an interleaving unrelated to either.
    header_order = names[::-1]
    one_byte = ["model.ids", "fp8_scales"]
    rest = [n for n in names if n not in one_byte]
    data_order = one_byte + rest[1::2] + rest[0::2]
    path = os.path.join(workdir, "world.safetensors")
    write_file(path, t, header_order, data_order, {"format": "pt"}, 5)

    rc, out, err = run(helper, "read", path)
    if rc != 0:
        fail(f"grove could not load the file with rename and strict=false:\n{out}{err}")
    got = json.loads(out)
    want = expected_world(t)
    for name, values in want.items():
        if got["values"].get(name) != values:
            fail(f"{name}: grove loaded {got['values'].get(name)}, numpy says {values}")
    if set(got["values"]) != set(want):
        fail(f"leaves {sorted(got['values'])}")
    if got["missing"] != ["not_in_file"]:
        fail(f"report.missing {got['missing']}")
    unexpected = [n for n in header_order if n in ("model.extra.running_mean", "fp8_scales", "rotation", "packed")]
    if got["unexpected"] != unexpected:
        fail(f"report.unexpected {got['unexpected']}, expected {unexpected}")
    if got["metadata"] != {"format": "pt"}:
        fail(f"metadata {got['metadata']}")

    rc, out, err = run(helper, "strict", path)
    got = json.loads(out) if rc == 0 else {}
    message = got.get("error", "")
    needles = ['tensor "not_in_file" (key path .not_in_file) is missing from the file',
               'the file has tensor "model.extra.running_mean" (F32 [4]), which the tree does not have',
               'the file has tensor "fp8_scales" (F8_E4M3 [3])', 'the file has tensor "rotation" (C64 [2])',
               'the file has tensor "packed" (F4 [4])', "5 problems"]
    if not message.startswith("grove::io::load_into: ") or not all(n in message for n in needles):
        fail(f"the strict load's error {message!r} ({err})")
    if got.get("untouched") is not True:
        fail("the strict load that failed changed the tree")

    rc, out, err = run(helper, "inspect", path)
    if rc != 0 or json.loads(out) != {n: t[n][0] for n in names}:
        fail(f"inspect listed {out!r} ({err})")

    # A tensor of a dtype its leaf cannot hold, renamed onto a float leaf: refused by name.
    bad = dict(t)
    bad["model.not_in_file"] = ("F8_E4M3", [2], bytes([0x38, 0x40]))
    path = os.path.join(workdir, "world_fp8.safetensors")
    write_file(path, bad, list(bad), list(bad), {}, 0)
    rc, out, err = run(helper, "read", path)
    needle = ('tensor "model.not_in_file" (renamed "not_in_file") (key path .not_in_file): '
              'dtype F8_E4M3 in the file, F32 (float32) in the tree; grove does not convert F8_E4M3 to F32')
    if rc == 0 or needle not in err:
        fail(f"an F8 tensor onto a float leaf: {err!r}")
    print(f"OK: grove loaded {len(want) - 1} tensors of a torch-style file (F16/BF16, widening, unaligned, "
          "scattered) with rename and strict=false, values and report exact; strict refused it untouched")


def read_file(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    arrays = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if info["dtype"] not in ("F16", "BF16"):
            fail(f"{name} is {info['dtype']}, expected F16 or BF16")
        count = int(np.prod(info["shape"], dtype=np.int64))
        if 2 * count != end - begin:
            fail(f"{name}: shape {info['shape']} does not fill {info['data_offsets']}")
        arrays[name] = (info["dtype"], np.frombuffer(raw[8 + n + begin:8 + n + end], dtype="<u2").reshape(info["shape"]))
    return arrays


# The float inputs of checkpoint_world.cpp's inputs(), as float32 bits, row-major (3, 6).
INPUT_BITS = [0x00000000, 0x80000000, 0x3F800000, 0x3DCCCCCD, 0x477FE000, 0x477FF000, 0x33800000,
              0x33000000, 0x33C00000, 0x3F808000, 0x3F818000, 0x7F800000, 0xFF800000, 0x7FC00000,
              0xFFC00000, 0x7F7FFFFF, 0x00000001, 0xC2F6E979]


def bf16_round(f32_bits):
    """float32 bits -> bfloat16 bits, round to nearest even, NaN quieted (integer arithmetic)."""
    out = []
    for b in np.asarray(f32_bits, dtype=np.uint32).reshape(-1).tolist():
        if (b & 0x7FFFFFFF) > 0x7F800000:
            out.append((b >> 16) | 0x0040)
        else:
            out.append(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF)
    return out


def half(helper, workdir):
    paths = [os.path.join(workdir, f) for f in ("half.safetensors", "as_f16.safetensors", "as_bf16.safetensors")]
    rc, out, err = run(helper, "write", *paths)
    if rc != 0:
        fail(f"the helper could not write: {err}")
    got = read_file(paths[0])
    want = {"h": ("F16", [0x0000, 0x8000, 0x3C00, 0x7C00, 0x0001, 0x7E01], (2, 3)),
            "b": ("BF16", [0x3F80, 0xFF80, 0x0001, 0x7FC1], (4,)),
            "h_scalar": ("F16", [0xC500], ())}
    for name, (dtype, bits, shape) in want.items():
        if name not in got or got[name][0] != dtype or got[name][1].shape != shape or \
                got[name][1].reshape(-1).tolist() != bits:
            fail(f"{name}: {got.get(name)}, expected {dtype} {shape} {bits}")
    if np.frombuffer(u16(0xC500).tobytes(), "<f2")[0] != -5.0:
        fail("the F16 scalar is not -5")

    inputs = np.array(INPUT_BITS, dtype=np.uint32).view(np.float32).reshape(3, 6)
    third = np.float32(-1.0) / np.float32(3.0)
    f16 = read_file(paths[1])
    with np.errstate(over="ignore"):  # 65520 and F32 max overflow to inf, as they must
        want_m = inputs.astype(np.float16).view(np.uint16)  # numpy rounds to nearest even
    if f16["m"][0] != "F16" or not np.array_equal(f16["m"][1], want_m):
        fail(f"F16 rounding: grove {f16['m'][1].tolist()}, numpy {want_m.tolist()}")
    if f16["s"][1].tolist() != int(np.float16(third).view(np.uint16)):
        fail(f"F16 scalar {f16['s'][1]}")
    bf16 = read_file(paths[2])
    want_b = np.array(bf16_round(INPUT_BITS), dtype=np.uint16).reshape(3, 6)
    if bf16["m"][0] != "BF16" or not np.array_equal(bf16["m"][1], want_b):
        fail(f"BF16 rounding: grove {bf16['m'][1].tolist()}, expected {want_b.tolist()}")
    if bf16["s"][1].tolist() != bf16_round([third.view(np.uint32)])[0]:
        fail(f"BF16 scalar {bf16['s'][1]}")
    print("OK: numpy read grove's F16/BF16 leaves bit for bit, and its F16/BF16 rounding of floats "
          "matches numpy's and round-to-nearest-even")


# A torch nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)) held as `self.net`: its
# state_dict, weight (out, in). Random float32 values with a few special ones.
def layout_arrays():
    rng = np.random.default_rng(15)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    w0[0, 3], w0[2, 0] = np.float32(-0.0), np.float32(1e-40)  # -0 and a subnormal, placed unsymmetrically
    return {
        "w0": w0, "b0": rng.standard_normal(3).astype(np.float32),
        "w1": rng.standard_normal((2, 3)).astype(np.float32), "b1": rng.standard_normal(2).astype(np.float32),
    }


def rows_hex(a):
    a = a.reshape(a.shape[0], -1) if a.ndim == 2 else a.reshape(-1, 1)
    return [hex_of(np.ascontiguousarray(row)) for row in a]


def check_layout(helper, mode, path, arrays, transposed):
    rc, out, err = run(helper, mode, path)
    if rc != 0:
        fail(f"{mode}: grove could not load the file:\n{out}{err}")
    got = json.loads(out)
    # grove's w is (out, in): element (i, j) is torch's weight[i, j] and Flax's kernel[j, i].
    want = {"0/w": arrays["w0"], "0/b": arrays["b0"], "2/w": arrays["w1"], "2/b": arrays["b1"]}
    if mode == "flax_vector":
        want = {"0/w": arrays["w0"], "0/b": arrays["b0"], "1/w": arrays["w1"], "1/b": arrays["b1"]}
    if set(got) != set(want):
        fail(f"{mode}: leaves {sorted(got)}, expected {sorted(want)}")
    for name, a in want.items():
        if got[name] != rows_hex(a):
            fail(f"{mode}: {name}: grove loaded {got[name]}, numpy says {rows_hex(a)}")
        if a.ndim == 2:  # the same, element by element, from the array in the file's own layout
            stored = a.T if transposed else a
            for i in range(a.shape[0]):
                for j in range(a.shape[1]):
                    element = stored[j, i] if transposed else stored[i, j]
                    if got[name][i][j] != hex_of(np.array([element]))[0]:
                        fail(f"{mode}: {name} ({i}, {j})")


def layouts(helper, workdir):
    a = layout_arrays()
    torch = {"net.0.weight": a["w0"], "net.0.bias": a["b0"], "net.2.weight": a["w1"], "net.2.bias": a["b1"]}
    flax = {"params/Dense_0/kernel": np.ascontiguousarray(a["w0"].T), "params/Dense_0/bias": a["b0"],
            "params/Dense_1/kernel": np.ascontiguousarray(a["w1"].T), "params/Dense_1/bias": a["b1"]}
    for mode, arrays in (("torch", torch), ("flax", flax)):
        tensors = {n: ("F32", list(v.shape), v.astype("<f4").tobytes()) for n, v in arrays.items()}
        names = list(tensors)
        path = os.path.join(workdir, f"{mode}.safetensors")
        write_file(path, tensors, names[::-1], names[1:] + names[:1], {"format": "pt" if mode == "torch" else "flax"}, 0)
        check_layout(helper, mode, path, a, mode == "flax")
        if mode == "flax":
            check_layout(helper, "flax_vector", path, a, True)
    print("OK: a torch nn.Sequential state_dict and a Flax Dense tree (kernels transposed) loaded into "
          "grove's dense parameters, every element equal to numpy's")


# The N-D tensors of the `tensors` direction: (dtype, numpy array in the file's dtype).
def nd_tensors():
    rng = np.random.default_rng(151)
    t3 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t3[1, 0, 3] = np.float32(-0.0)
    specials = [0x0000, 0x8000, 0x3C00, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x83FF, 0x7BFF, 0x0400,
                0xFE01, 0x3555]
    others = rng.integers(0, 0x7C00, size=12, dtype=np.uint16)  # finite, positive
    t4 = np.array(specials + others.tolist(), dtype=np.uint16)[rng.permutation(24)].reshape(2, 3, 2, 2)
    tb = np.array([0x3F80, 0x8000, 0x7F80, 0x0001, 0x7FC1, 0xC2F7], dtype=np.uint16).reshape(3, 1, 2)
    return {
        "t3": ("F32", t3),
        "t4": ("F16", t4.view(np.float16)),
        "tb": ("BF16", tb),  # bits; numpy has no bfloat16
        "u3": ("F32", rng.standard_normal((3, 2, 5)).astype(np.float32)),
        "t1": ("F32", np.arange(5, dtype=np.float32) - 2.5),
        "t0": ("F64", np.array(-1.0 / 3.0)),
        "t2": ("F32", rng.standard_normal((3, 4)).astype(np.float32)),
        "i3": ("I16", np.array([-32768, 32767, 0, -1, 5, 6, 7, 8, 9, 10, 11, -12], dtype=np.int16).reshape(2, 2, 3)),
    }


LITTLE = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "BF16": "<u2", "I16": "<i2", "U8": "u1"}


def write_nd(path, arrays):
    """The tensors after a U8 tensor of 1 to 3 bytes, whichever places u3 (right after it) where
    it is not aligned for float32 in the file."""
    for pad in (1, 2, 3):
        tensors = {"pad": ("U8", [pad], bytes(range(42, 42 + pad)))}
        for name, (dtype, a) in arrays.items():
            tensors[name] = (dtype, list(a.shape), np.ascontiguousarray(a).astype(LITTLE[dtype]).tobytes())
        names = list(tensors)
        data_order = ["pad", "u3"] + [n for n in names if n not in ("pad", "u3")]
        write_file(path, tensors, names[::-1], data_order, {"format": "np"}, 2)
        raw = open(path, "rb").read()
        (n,) = struct.unpack("<Q", raw[:8])
        if (8 + n + json.loads(raw[8:8 + n])["u3"]["data_offsets"][0]) % 4 != 0:
            return
    fail("test setup: u3 is aligned in the file")


def tensors(helper, workdir):
    arrays = nd_tensors()
    path = os.path.join(workdir, "tensors.safetensors")
    write_nd(path, arrays)
    rc, out, err = run(helper, "tensors", path)
    if rc != 0:
        fail(f"grove could not load the N-D tensors:\n{out}{err}")
    got = json.loads(out)
    bf16 = lambda bits: (bits.astype(np.uint32) << 16).view(np.float32)
    # What each leaf must hold: numpy's conversion of the file's array to the leaf's dtype.
    want = {
        "t3": hex_of(arrays["t3"][1]),
        "t4": hex_of(arrays["t4"][1].astype(np.float32)),
        "tb": hex_of(bf16(arrays["tb"][1])),
        "u3": hex_of(arrays["u3"][1]),
        "t1": hex_of(arrays["t1"][1]),
        "t0": hex_of(arrays["t0"][1].reshape(1)),
        "t2": hex_of(arrays["t2"][1].astype(np.float64)),
        "i3": arrays["i3"][1].reshape(-1).astype(int).tolist(),
    }
    shapes = {name: list(a.shape) for name, (_, a) in arrays.items()}
    for order in ("col", "row"):
        leaves = got[order]
        if set(leaves) != set(want):
            fail(f"{order}: leaves {sorted(leaves)}")
        for name, values in want.items():
            if leaves[name]["shape"] != shapes[name]:
                fail(f"{order}: {name}: shape {leaves[name]['shape']}, numpy {shapes[name]}")
            if leaves[name]["values"] != values:
                fail(f"{order}: {name}: grove loaded {leaves[name]['values']}, numpy says {values}")
    # Element by element, by index, for the unaligned one: leaf(i, j, k) == a[i, j, k].
    u3 = arrays["u3"][1]
    for order in ("col", "row"):
        flat = got[order]["u3"]["values"]
        for i, j, k in np.ndindex(*u3.shape):
            if flat[(i * 2 + j) * 5 + k] != hex_of(u3[i, j, k].reshape(1))[0]:
                fail(f"{order}: u3[{i}, {j}, {k}]")
    if got["half"] != {"t4": {"shape": shapes["t4"], "values": hex_of(arrays["t4"][1])}}:
        fail(f"t4 into Eigen::half: {got['half']}, numpy says {hex_of(arrays['t4'][1])}")
    fixed = got["fixed"]
    want_fixed = {"t3": want["t3"], "t4": hex_of(arrays["t4"][1].astype(np.float64)), "u3": want["u3"]}
    for name, values in want_fixed.items():
        if fixed[name]["shape"] != shapes[name] or fixed[name]["values"] != values:
            fail(f"TensorFixedSize {name}: {fixed[name]}, numpy says {shapes[name]} {values}")
    unexpected = [n for n in ["pad"] + list(arrays) if n not in want_fixed]
    if sorted(got["fixed_unexpected"]) != sorted(unexpected):
        fail(f"TensorFixedSize load: unexpected {got['fixed_unexpected']}, expected {unexpected}")
    for case, tree_shape in (("rank", "[6, 4]"), ("dimensions", "[2, 4, 3]"), ("fixed", "[2, 4, 3]")):
        e = got["errors"][case]
        needle = f"tensor \"t3\" (key path ['t3']): shape [2, 3, 4] in the file, {tree_shape} in the tree"
        if not e["error"].startswith("grove::io::load_into: ") or needle not in e["error"]:
            fail(f"{case}: error {e['error']!r}, expected it to contain {needle!r}")
        if e.get("untouched") is not True:
            fail(f"{case}: the failed load changed the leaf")

    # grove writes; numpy reads.
    path = os.path.join(workdir, "grove_tensors.safetensors")
    rc, out, err = run(helper, "tensors_write", path)
    if rc != 0:
        fail(f"the helper could not write tensors: {err}")
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    written = {"col": ("F32", (2, 3, 4)), "row": ("F64", (2, 1, 3, 2)), "fixed": ("F32", (3, 2, 2)),
               "line": ("I32", (5,)), "scalar": ("F32", ()), "half": ("F16", (2, 2, 2)),
               "five": ("I16", (1, 2, 1, 2, 2))}
    numpy_of = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "F16": "<f2", "I16": "<i2"}
    if set(header) != set(written):
        fail(f"grove wrote {sorted(header)}")
    for name, (dtype, shape) in written.items():
        info = header[name]
        if info["dtype"] != dtype or tuple(info["shape"]) != shape:
            fail(f"{name}: {info['dtype']} {info['shape']}, expected {dtype} {list(shape)}")
        begin, end = info["data_offsets"]
        a = np.frombuffer(raw[8 + n + begin:8 + n + end], dtype=numpy_of[dtype]).reshape(shape)
        expected = np.zeros(shape)
        for index in np.ndindex(*shape):
            v = 0.25
            for i in index:
                v = v * 10 + i
            expected[index] = v
        expected = expected.astype(numpy_of[dtype])  # integers: truncated, as C++'s cast
        if not np.array_equal(a, expected):
            fail(f"{name}: grove wrote {a.tolist()}, expected {expected.tolist()}")
    print("OK: N-D tensors (F32, F16 with specials, BF16, unaligned, 0-D to 4-D, widened) loaded into "
          "column-major, row-major and fixed-size Eigen tensors, element (i, j, k) equal to numpy's "
          "a[i, j, k]; mismatched ranks and dimensions refused by name; numpy read grove's tensors of "
          "both storage orders")


def main():
    directions = {"world": world, "half": half, "layouts": layouts, "tensors": tensors}
    if len(sys.argv) != 4 or sys.argv[1] not in directions:
        print(__doc__)
        sys.exit(2)
    _, direction, helper, workdir = sys.argv
    os.makedirs(workdir, exist_ok=True)
    directions[direction](helper, workdir)


if __name__ == "__main__":
    main()
