"""grove::random against the real jax.random on XLA:CPU, for one function family.

Usage: random_oracle.py RANDOM_DRIVER FAMILY. The driver (tests/oracle/random_driver.cpp) prints
grove's values for every case of FAMILY in all four configurations (jax_threefry_partitionable on
and off, jax_enable_x64 off and on: float32 / int32 / uint32 and float64 / int64 / uint64), and each
case's parameters; this script calls jax.random with the same parameters and seeds, in the same
configuration, and compares:

- bit for bit where grove promises it (docs/random.md): keys, split, fold_in, bits, uniform,
  bernoulli, randint, permutation, gumbel and categorical (grove evaluates log as XLA:CPU does);
- normal and truncated_normal within the largest distance in ulps measured (LIMITS below;
  docs/random.md says where the last bits come from).

All cases of one configuration run as one jitted function: XLA compiles the threefry hash for
every new shape and dtype, and compiling, not running, is most of this script's time.
"""
import sys
import time

import numpy as np

import oracle_common as oc

import jax
import jax.numpy as jnp

# The largest distance in ulps allowed between grove and XLA:CPU, per function and float width:
# the measured maxima (docs/random.md, "How close to JAX"). A function not listed must be bit for
# bit. Both differences come from log1p inside erf_inv: XLA's is Cephes' rational function for |y| < sqrt(2) - 1
# and log(1 + y) beyond, grove's a branch-free one of its own (1.1% of float32 and 5% of float64
# values differ).
LIMITS = {
    ("normal", "float32"): 3,
    ("normal", "float64"): 30,
    ("truncated_normal", "float32"): 3,
    ("truncated_normal", "float64"): 30,
}


def parse_params(text):
    out = {}
    for field in text.split():
        name, value = field.split("=", 1)
        out[name] = value
    out["seed"] = int(out["seed"])
    out["shape"] = tuple(int(d) for d in out["shape"].split(","))
    out["x64"] = out["x64"] == "1"
    return out


def configure(x64, layout):
    jax.config.update("jax_enable_x64", x64)
    jax.config.update("jax_threefry_partitionable", layout == "partitionable")


def float_type(p):
    return np.float64 if p["x64"] else np.float32


def int_type(p):
    return np.int64 if p["x64"] else np.int32


def real(p, name):
    """A float parameter (printed as a hexadecimal float) in the case's float type."""
    return np.asarray(float.fromhex(p[name]), dtype=float_type(p))


def exact_ulps(a, b):
    """|a - b| in ulps, exactly (as uint64), for float arrays of one dtype; 0 where both are NaN,
    2^64 - 1 where one is. (oracle_common.ulp_distance goes through float64, which rounds
    float64 distances to multiples of 512 or 1024.)"""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.dtype.kind != "f":
        raise TypeError(f"exact_ulps of {a.dtype} and {b.dtype}")
    width = 8 * a.dtype.itemsize
    unsigned = {32: np.uint32, 64: np.uint64}[width]
    sign = unsigned(1 << (width - 1))

    def ordered(x):  # a monotonic map of the floats onto unsigned integers (+0 next to -0)
        u = x.view(unsigned)
        return np.where(u & sign, ~u, u | sign).astype(np.uint64)

    oa, ob = ordered(a), ordered(b)
    d = np.where(oa > ob, oa - ob, ob - oa)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    d = np.where(nan_a & nan_b, np.uint64(0), d)
    return np.where(nan_a ^ nan_b, np.uint64(2**64 - 1), d)


def jax_call(p, records, case):
    """(f, args): jax.jit of f(key(seed), *args) gives what jax.random gives for the case."""
    fn, shape = p["fn"], p["shape"]
    ft = float_type(p)
    if fn == "bits":
        dtype = np.dtype(p["dtype"])
        return (lambda k: jax.random.bits(k, shape, dtype)), ()
    if fn == "uniform":
        if "minval" in p:
            return (lambda k, lo, hi: jax.random.uniform(k, shape, ft, lo, hi),
                    (real(p, "minval"), real(p, "maxval")))
        return (lambda k: jax.random.uniform(k, shape, ft)), ()
    if fn == "normal":
        return (lambda k: jax.random.normal(k, shape, ft)), ()
    if fn == "truncated_normal":
        return (lambda k, lo, hi: jax.random.truncated_normal(k, lo, hi, shape, ft),
                (real(p, "lower"), real(p, "upper")))
    if fn == "gumbel":
        return (lambda k: jax.random.gumbel(k, shape, ft)), ()
    if fn == "bernoulli":
        return (lambda k, q: jax.random.bernoulli(k, q, shape)), (real(p, "p"),)
    if fn == "randint":
        it = int_type(p)
        return (lambda k, lo, hi: jax.random.randint(k, shape, lo, hi, it)), (it(p["low"]), it(p["high"]))
    if fn == "permutation":
        return (lambda k: jax.random.permutation(k, shape[0])), ()
    if fn == "categorical":
        logits = records[case.rsplit(".", 1)[0] + "." + p["logits"]]
        if p["axis"] == "vector":
            return (lambda k, x: jax.vmap(jax.random.categorical)(jax.random.split(k, shape[0]), x),
                    (logits[:shape[0]],))
        axis = int(p["axis"])
        return (lambda k, x: jax.random.categorical(k, x, axis)), (logits,)
    if fn == "split":
        return (lambda k: jax.random.key_data(jax.random.split(k, shape[0]))), ()
    if fn == "fold_in":
        return (lambda k, d: jax.random.key_data(jax.vmap(jax.random.fold_in, (None, 0))(k, d)),
                (records[case + ".data"],))
    if fn == "chain":
        def step(k, i):
            k, sub = jax.random.split(k)
            k = jax.random.fold_in(k, i)
            return k, jnp.stack([jax.random.key_data(sub), jax.random.key_data(k)])
        return (lambda k: jax.lax.scan(step, k, jnp.arange(shape[0], dtype=np.uint32))[1]), ()
    if fn == "seeds":
        seeds = records[case + ".data"].astype(np.int64 if p["x64"] else np.int32)
        return (lambda _, s: jax.random.key_data(jax.vmap(jax.random.key)(s))), (seeds,)
    raise SystemExit(f"random_oracle: no JAX call for function {fn!r}")


def jax_values(cases, params, records):
    """JAX's values of cases (all of one configuration, which configure() has set), from one
    jitted function. Cases with one seed share one key, so that XLA hashes the counters of cases
    with the same key and shape once (the driver gives a function's variants one seed)."""
    calls = [jax_call(params[c], records, c) for c in cases]
    seeds = sorted({params[c]["seed"] for c in cases})
    which = [seeds.index(params[c]["seed"]) for c in cases]
    seed_array = np.array(seeds, dtype=np.int64 if params[cases[0]]["x64"] else np.int32)

    def everything(seed_values, args):
        keys = [jax.random.key(seed_values[i]) for i in range(len(seeds))]
        return [f(keys[w], *a) for (f, _), w, a in zip(calls, which, args)]

    outputs = jax.jit(everything)(seed_array, [a for _, a in calls])
    return {c: np.asarray(o) for c, o in zip(cases, outputs)}


def check_ulps(verdict, name, ours, theirs, limit):
    if not verdict.expect(ours.shape == theirs.shape and ours.dtype == theirs.dtype,
                          f"{name}: grove gave {ours.dtype}{ours.shape}, JAX {theirs.dtype}{theirs.shape}"):
        return
    d = exact_ulps(ours, theirs)
    worst = int(d.max()) if d.size else 0
    at = int(d.argmax()) if d.size else 0
    if verdict.expect(worst <= limit, f"{name}: {worst} ulps apart at flat index {at} (limit {limit}): "
                                      f"grove {ours.ravel()[at]!r}, JAX {theirs.ravel()[at]!r}"):
        counts = np.bincount(np.minimum(d, 9).astype(np.int64).ravel(), minlength=10)
        verdict.note(f"{name}: {ours.size} values, at most {worst} ulps apart (limit {limit}); "
                     f"by ulps 0..8, 9+: {counts.tolist()}")


def main():
    driver, family = sys.argv[1], sys.argv[2]
    verdict = oc.Verdict(f"random_{family}")
    started = time.perf_counter()
    records = oc.run_driver(driver, family)
    verdict.note(f"grove's driver: {time.perf_counter() - started:.2f} s")
    cases = [name[: -len(".params")] for name in records if name.endswith(".params")]
    verdict.expect(len(cases) > 0, f"the driver printed no case for {family!r}")
    params = {c: parse_params(records[c + ".params"]) for c in cases}
    configs = sorted({(p["x64"], p["layout"]) for p in params.values()})
    for x64, layout in configs:
        t0 = time.perf_counter()
        configure(x64, layout)
        group = [c for c in cases if (params[c]["x64"], params[c]["layout"]) == (x64, layout)]
        theirs_all = jax_values(group, params, records)
        verdict.note(f"  (JAX, {layout}, x64={x64}: {len(group)} cases in "
                     f"{time.perf_counter() - t0:.2f} s)")
        for case in group:
            p, ours, theirs = params[case], records[case], theirs_all[case]
            if p["fn"] in ("permutation", "categorical"):
                # JAX's indices are int64 in 64-bit mode, grove's int32.
                verdict.expect(theirs.size == 0 or theirs.max() < 2**31, f"{case}: JAX's values")
                theirs = theirs.astype(np.int32)
            if p["fn"] in ("split", "fold_in", "chain", "seeds"):
                theirs = theirs.reshape(-1)
            limit = LIMITS.get((p["fn"], str(theirs.dtype)))
            if limit is None:
                verdict.same_bits(case, ours, theirs)
            else:
                check_ulps(verdict, case, ours, theirs, limit)
    verdict.note(f"{len(cases)} cases in {time.perf_counter() - started:.2f} s")
    verdict.finish()


if __name__ == "__main__":
    main()
