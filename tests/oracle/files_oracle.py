"""grove's safetensors checkpoints against the real `safetensors` package (with numpy, ml_dtypes,
jax and flax of tests/oracle/requirements.txt). Usage: files_oracle.py DRIVER CASE, where DRIVER
is tests/oracle/files_driver.cpp's program and CASE one of:

safetensors_to_grove  A file safetensors.numpy.save_file writes, of every dtype grove has a leaf
                      for (F64 to BOOL, F16, and BF16 through ml_dtypes; ranks 0 to 4; random bit
                      patterns, so NaNs with payloads, signaling NaNs, infinities, subnormals and
                      -0), and one safetensors.flax.save_file writes (jax arrays of float32,
                      bfloat16, float16, int32, uint8, bool) load strictly into grove's trees bit
                      for bit, with their metadata. The numpy file's F32 and F64 tensors narrowed on
                      load (load_options::convert) equal ml_dtypes' and numpy's astype (to
                      bfloat16, float16, float32) bit for bit, NaN payloads aside (grove keeps the
                      top of the payload and quiets; the oracles' NaNs are only required to be NaN
                      of the same sign).
grove_to_safetensors  grove's file of the same leaves (its own random bit patterns) loads with
                      safetensors.numpy.load_file, the reference reader and its checks, with the
                      same names, dtypes, shapes and bits, and its metadata (the user's and
                      grove's) reads back with safe_open; float leaves saved as BF16 and F16
                      (save_options::floats) equal ml_dtypes' and numpy's astype, NaN payloads
                      aside as above.
flax_model            A flax MLP of Dense, LayerNorm, relu, Dense, LayerNorm, Dense with random
                      parameters, saved with safetensors.flax.save_file under the names of its
                      compact module (Dense_0, LayerNorm_0, Dense_1, ...) and of
                      flax.linen.Sequential (layers_0, layers_1, layers_3, ...), loads into
                      grove's nn::sequential with io::flax_dense_names(params) and
                      io::flax_kernels(): each parameter bit for bit (kernels transposed), and
                      nn::apply's output for a batch close to flax's apply (float32; measured
                      bound below).
"""
import os
import sys
import tempfile

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy

import oracle_common
from oracle_common import Verdict

# The leaves of the driver's `Mixed`: tensor name -> (numpy dtype, shape).
MIXED = {
    "f32": (np.float32, (64, 48)),
    "f64": (np.float64, (2, 3, 4)),
    "f16": (np.float16, (2, 1, 3, 2)),
    "bf16": (ml_dtypes.bfloat16, (4, 3)),
    "i8": (np.int8, (7,)),
    "i16": (np.int16, (2, 3)),
    "i32": (np.int32, (3, 2)),
    "i64": (np.int64, ()),
    "u8": (np.uint8, (2, 2)),
    "u16": (np.uint16, (5,)),
    "u32": (np.uint32, (4,)),
    "u64": (np.uint64, (3,)),
    "flags": (np.bool_, (2, 3)),
    "scalar": (np.float32, ()),
    "cube": (np.float32, (2, 2, 2)),
}
# The driver's `FlaxMixed`.
FLAX = {
    "kernel": (np.float32, (3, 4)),
    "bf16": (ml_dtypes.bfloat16, (2, 3, 2)),
    "f16": (np.float16, (5,)),
    "i32": (np.int32, (2, 2)),
    "u8": (np.uint8, (3,)),
    "flags": (np.bool_, (4,)),
}
UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
# Bit patterns every float tensor gets at its first elements: quiet and signaling NaNs with
# payloads and both signs, infinities, -0, the smallest subnormal, the largest finite value.
SPECIAL = {
    2: [0x7E01, 0xFE00, 0x7C01, 0x7C00, 0xFC00, 0x8000, 0x0001, 0x7BFF, 0x7F81, 0xFF80, 0x7F7F],
    4: [0x7FC01234, 0xFFC00000, 0x7F800001, 0x7F800000, 0xFF800000, 0x80000000, 0x00000001,
        0x7F7FFFFF],
    8: [0x7FF8000000001234, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF0000000000000,
        0xFFF0000000000000, 0x8000000000000000, 0x0000000000000001],
}


def bits(a):
    """The array's elements as unsigned integers of their width (bool as uint8)."""
    a = np.asarray(a)
    return a.view(UNSIGNED[a.dtype.itemsize])


def random_array(rng, dtype, shape):
    """Random bit patterns of `dtype` (0/1 for bool), the special patterns first for floats."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == np.bool_:
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    a = np.frombuffer(rng.bytes(n * dtype.itemsize), dtype=UNSIGNED[dtype.itemsize]).copy()
    if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
        special = SPECIAL[dtype.itemsize][:n]
        a[:len(special)] = special
    return a.view(dtype).reshape(shape)


def record_as(records, name, dtype):
    """The driver's record `name` as `dtype` (BF16 comes as its uint16 bits)."""
    r = records[name]
    if np.dtype(dtype) == ml_dtypes.bfloat16:
        return r.view(ml_dtypes.bfloat16)
    return r


def narrowed(a, dtype):
    """The oracle's rounding: astype, quietly (the overflows and NaNs are what is tested)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return a.astype(dtype)


def same_bits_but_nan_payloads(v, name, ours, theirs):
    """Bit for bit where the oracle's value is not NaN; NaN of the same sign where it is."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if not v.expect(ours.shape == theirs.shape and ours.dtype == theirs.dtype,
                    f"{name}: grove {ours.dtype}{ours.shape}, the oracle {theirs.dtype}{theirs.shape}"):
        return
    nan = np.isnan(theirs.astype(np.float64))
    v.same_bits(f"{name} (not NaN)", ours[~nan], theirs[~nan])  # 1-D
    top = np.uint64(8 * ours.dtype.itemsize - 1)
    ours_nan = ours[nan]
    sign_ours = bits(ours_nan).astype(np.uint64) >> top
    sign_theirs = bits(theirs[nan]).astype(np.uint64) >> top
    ok = v.expect(bool(np.isnan(ours_nan.astype(np.float64)).all() and (sign_ours == sign_theirs).all()),
                  f"{name}: where the oracle has NaN, grove has {ours_nan[:5].tolist()}")
    if ok:
        same = int(np.count_nonzero(bits(ours_nan) == bits(theirs[nan])))
        v.note(f"{name}: {nan.sum()} NaNs, NaN of the same sign in grove ({same} with the same bits)")


def same_bits(v, name, ours, theirs):
    """Verdict.same_bits, for rank 0 too (its byte view needs an axis)."""
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if v.expect(ours.shape == theirs.shape, f"{name}: grove's shape {ours.shape}, the oracle's {theirs.shape}"):
        v.same_bits(name, ours.reshape(-1), theirs.reshape(-1))


def check_metadata(v, what, records, prefix, expected):
    got = {k[len(prefix):]: r for k, r in records.items() if k.startswith(prefix)}
    v.expect(got == expected, f"{what}: grove read the metadata {got}, the file holds {expected}")


def safetensors_to_grove(driver, tmp):
    v = Verdict("safetensors files into grove")
    rng = np.random.default_rng(20260)
    mixed = {name: random_array(rng, dt, shape) for name, (dt, shape) in MIXED.items()}
    # Half of the F32 matrix ordinary values (random bits are mostly huge or tiny), so that the
    # narrowing checks below round values in BF16's and F16's range too.
    f32 = mixed["f32"].reshape(-1)
    f32[len(SPECIAL[4])::2] = rng.normal(0, 4, f32[len(SPECIAL[4])::2].size).astype(np.float32)
    numpy_meta = {"format": "np", "epoch": "3"}
    numpy_file = os.path.join(tmp, "numpy.safetensors")
    safetensors.numpy.save_file(mixed, numpy_file, metadata=numpy_meta)

    import jax.numpy as jnp
    from safetensors.flax import save_file as flax_save_file
    flax_arrays = {name: jnp.asarray(random_array(rng, dt, shape)) for name, (dt, shape) in FLAX.items()}
    # What the file holds is what jax held: safetensors.flax writes np.asarray of each array.
    flax_expected = {name: np.asarray(a) for name, a in flax_arrays.items()}
    flax_meta = {"format": "flax"}
    flax_file = os.path.join(tmp, "flax.safetensors")
    flax_save_file(flax_arrays, flax_file, metadata=flax_meta)

    records = oracle_common.run_driver(driver, "load", numpy_file, flax_file)
    for name, (dt, _) in MIXED.items():
        same_bits(v, f"numpy API {name}", record_as(records, f"numpy/{name}", dt), mixed[name])
    check_metadata(v, "numpy API", records, "numpy/metadata/", numpy_meta)
    for name, (dt, _) in FLAX.items():
        same_bits(v, f"flax API {name}", record_as(records, f"flax/{name}", dt), flax_expected[name])
    check_metadata(v, "flax API", records, "flax/metadata/", flax_meta)

    # Narrowed on load: F32 to BF16 and F16, F64 to F32, rounded to nearest, ties to even.
    same_bits_but_nan_payloads(v, "F32 loaded into bfloat16 (ml_dtypes' astype)",
                               record_as(records, "narrowed/f32", ml_dtypes.bfloat16),
                               narrowed(mixed["f32"], ml_dtypes.bfloat16))
    same_bits_but_nan_payloads(v, "F32 loaded into half (numpy's astype)",
                               records["narrowed_f16/f32"], narrowed(mixed["f32"], np.float16))
    same_bits_but_nan_payloads(v, "F64 loaded into float (numpy's astype)",
                               records["narrowed/f64"], narrowed(mixed["f64"], np.float32))
    unexpected = int(records["narrowed/unexpected_count"][0])
    v.expect(unexpected == len(MIXED) - 2,
             f"a non-strict load of 2 of {len(MIXED)} tensors reported {unexpected} unexpected")
    return v


def grove_to_safetensors(driver, tmp):
    v = Verdict("grove's files read by safetensors")
    records = oracle_common.run_driver(driver, "save", tmp)
    path = os.path.join(tmp, "mixed.safetensors")
    loaded = safetensors.numpy.load_file(path)
    v.expect(sorted(loaded) == sorted(MIXED),
             f"safetensors read the tensors {sorted(loaded)}, grove saved {sorted(MIXED)}")
    for name, (dt, shape) in MIXED.items():
        if name not in loaded:
            continue
        theirs = loaded[name]
        v.expect(theirs.dtype == np.dtype(dt) and theirs.shape == shape,
                 f"{name}: safetensors read {theirs.dtype}{theirs.shape}, expected "
                 f"{np.dtype(dt)}{shape}")
        same_bits(v, f"{name} read by safetensors.numpy", theirs, record_as(records, f"mixed/{name}", dt))
    with safetensors.safe_open(path, framework="np") as f:
        meta = f.metadata()
    user = {k: x for k, x in meta.items() if not k.startswith("grove.")}
    v.expect(user == {"origin": "grove", "epoch": "7"}, f"safe_open read the user metadata {user}")
    v.expect(sorted(k for k in meta if k.startswith("grove.")) == ["grove.treedef", "grove.version"]
             and meta["grove.treedef"].startswith("PyTreeDef(CustomNode(Mixed[()], [*"),
             f"safe_open read grove's metadata {meta}")

    source = records["source/floats"]
    for storage, dt, how in (("bf16", ml_dtypes.bfloat16, "ml_dtypes'"), ("f16", np.float16, "numpy's")):
        theirs = safetensors.numpy.load_file(os.path.join(tmp, f"{storage}.safetensors"))["floats"]
        same_bits_but_nan_payloads(v, f"float saved as {storage.upper()} ({how} astype)", theirs,
                                   narrowed(source, dt))
    return v


def flax_model(driver, tmp):
    import jax
    import flax.linen as nn
    from safetensors.flax import save_file as flax_save_file
    from flax import traverse_util

    v = Verdict("a flax MLP with LayerNorms in grove")

    class Compact(nn.Module):
        @nn.compact
        def __call__(self, x):
            # One module per line: flax numbers them in the order they are built.
            x = nn.Dense(16)(x)
            x = nn.relu(nn.LayerNorm()(x))
            x = nn.Dense(8)(x)
            x = nn.LayerNorm()(x)
            return nn.Dense(4)(x)

    sequential = nn.Sequential([nn.Dense(16), nn.LayerNorm(), nn.relu, nn.Dense(8), nn.LayerNorm(),
                                nn.Dense(4)])
    rng = np.random.default_rng(7)
    x = rng.normal(size=(32, 6)).astype(np.float32)
    x_file = os.path.join(tmp, "x.records")
    oracle_common.write_records(x_file, {"x": x})
    # flax module -> grove layer of nn::sequential(dense, layer_norm, relu, dense, layer_norm, dense).
    layouts = {
        "compact": (Compact(), {"Dense_0": 0, "LayerNorm_0": 1, "Dense_1": 3, "LayerNorm_1": 4,
                                "Dense_2": 5}),
        "sequential": (sequential, {f"layers_{k}": k for k in (0, 1, 3, 4, 5)}),
    }
    files, expected = {}, {}
    for seed, (layout, (model, grove_layer)) in enumerate(layouts.items()):
        # flax's own tree of parameters (its names and shapes, from init traced abstractly, which
        # is quicker than running it), filled with random values: flax would initialise LayerNorm
        # to ones and zeros and biases to zeros, and then a scale and a bias, or two layers,
        # could be confused unnoticed.
        shapes = jax.eval_shape(model.init, jax.random.key(seed), x)
        params = jax.tree_util.tree_map(
            lambda s: (0.5 * rng.normal(size=s.shape)).astype(s.dtype), shapes)
        flat = traverse_util.flatten_dict(params, sep="/")
        files[layout] = os.path.join(tmp, f"{layout}.safetensors")
        flax_save_file(flat, files[layout])
        y = np.asarray(jax.jit(model.apply)(params, x))
        expected[layout] = (flat, grove_layer, y)

    records = oracle_common.run_driver(driver, "flax_model", files["compact"], files["sequential"], x_file)
    for layout, (flat, grove_layer, y) in expected.items():
        # Each flax parameter against the grove leaf it must have filled.
        # A module with a scale is a LayerNorm: its bias is grove's "bias", a Dense's is "b".
        norms = {name.split("/")[1] for name in flat if name.endswith("/scale")}
        wanted = {}
        for name, a in flat.items():
            _, module, leaf = name.split("/")
            grove_field = {"kernel": "w", "scale": "scale"}.get(leaf, "bias" if module in norms else "b")
            a = np.asarray(a)
            wanted[f"{layout}/params/{grove_layer[module]}/{grove_field}"] = a.T if leaf == "kernel" else a
        got = sorted(k for k in records if k.startswith(f"{layout}/params/"))
        v.expect(got == sorted(wanted), f"{layout}: grove's leaves {got}, flax's {sorted(wanted)}")
        for name, a in wanted.items():
            if name in records:
                same_bits(v, name, records[name], a)
        # Dense layers agree to rounding; flax's LayerNorm takes the variance as
        # mean(x^2) - mean(x)^2, grove's in two passes, which differ in the last bits.
        v.close(f"{layout}: grove's nn::apply against flax's apply", records[f"{layout}/y"], y,
                rtol=1e-5, atol=4e-6)
        diff = np.abs(records[f"{layout}/y"].astype(np.float64) - y)
        v.note(f"{layout}: largest |grove - flax| {diff.max():.3g} (outputs up to {np.abs(y).max():.3g}), "
               f"{int(oracle_common.ulp_distance(records[f'{layout}/y'], y).max())} ulps")
    return v


CASES = {"safetensors_to_grove": safetensors_to_grove, "grove_to_safetensors": grove_to_safetensors,
         "flax_model": flax_model}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        sys.exit(f"usage: files_oracle.py DRIVER {{{','.join(CASES)}}}")
    with tempfile.TemporaryDirectory() as tmp:
        CASES[sys.argv[2]](sys.argv[1], tmp).finish()
