"""grove::nn against flax and jax.value_and_grad (the C++ half: tests/oracle/flax_driver.cpp).

    flax_oracle.py DRIVER CASE [--x64]

CASE is one of
  init         every variance-scaling initializer grove has (glorot/he/lecun, normal and uniform,
               and variance_scaling with each mode and distribution) against
               jax.nn.initializers.* with in_axis=-1, out_axis=-2 (grove's weights are (out, in)),
               from the same key: the uniform ones bit for bit, the (truncated) normal ones within
               a measured ulp bound (grove::random's normals are within a few ulps of XLA's); and
               nn::dense(in, out[, init]).init(key) against flax's nnx.Linear(in, out,
               kernel_init=..., rngs=nnx.Rngs(params=key)) with flax's own initializer for its
               (in, out) kernel, the same way (see check_init for the layout).
  layer_norm   nn::layer_norm(features, eps) forward against flax.linen.LayerNorm(epsilon=eps),
               with random scale and bias, and with grove's init (ones, zeros) against flax's
               use_scale=False, use_bias=False; a measured ulp bound that grows with the
               example's condition (its largest input over its standard deviation).
  dropout      nn::dropout(rate) in a training pass with a key against flax.linen.Dropout and
               nnx.Dropout given the same key: the same mask, the same scaled output and the same
               vector-Jacobian product, bit for bit; in float64 against float32 JAX's mask, which
               grove's double dropout uses (flax under x64 draws float64 uniforms: see there).
  model_grads  the loss, the parameters' gradients and the input's gradient of two models (dense,
               layer norm, residual blocks, dropout and eight activations; a dense/activation chain
               with softmax cross-entropy, also on grove's fused engine) against jax.value_and_grad
               of the same function written with flax.linen modules: relative error (the largest
               difference over the largest magnitude, per leaf) under 1e-5 in float32, 1e-12 in
               float64.

Without --x64 the script checks float32 (JAX's default) and then runs itself with --x64 in a new
process for float64 (jax_enable_x64 must be set before JAX computes anything). Layouts: a grove
batch is (features, batch) column-major, numpy's (batch, features), so the driver's (features,
batch) records are transposed into flax's layout; a grove dense weight w is (out, in) and flax's
kernel is (in, out): the models use kernel = w.T, so jax's gradient of w is in grove's layout.
"""
import os
import subprocess
import sys

X64 = "--x64" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--x64"]

import jax  # noqa: E402

if X64:
    jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import linen as nn  # noqa: E402
from flax import nnx  # noqa: E402
from jax import lax  # noqa: E402
from jax.nn import initializers as jinit  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_common  # noqa: E402

DTYPE = np.float64 if X64 else np.float32
TAG = "f64" if X64 else "f32"

NAMED = {
    "glorot_normal": jinit.glorot_normal,
    "glorot_uniform": jinit.glorot_uniform,
    "he_normal": jinit.he_normal,
    "he_uniform": jinit.he_uniform,
    "lecun_normal": jinit.lecun_normal,
    "lecun_uniform": jinit.lecun_uniform,
}


def wrap(words):
    return jax.random.wrap_key_data(np.asarray(words, dtype=np.uint32))


def jax_initializer(name, **axes):
    """The jax.nn.initializers function the driver's NAME stands for."""
    if name.startswith("vs:"):
        _, scale, mode, distribution = name.split(":")
        return jinit.variance_scaling(float(scale), mode, distribution, **axes)
    return NAMED[name](**axes)


def ulps(a, b):
    """Elementwise distance in ulps, exact for float64 too (integer arithmetic on the bits)."""
    bits = {4: np.int32, 8: np.int64}[a.dtype.itemsize]
    def ordered(x):
        i = x.view(bits).astype(np.int64)
        return np.where(i < 0, np.iinfo(bits).min - i, i)
    return np.abs(ordered(a) - ordered(b))


# grove promises uniform initializers bit for bit and normal ones within a few ulps (its normals
# are XLA's algorithm with its own log1p; docs/random.md). Measured on the pinned stack: 4 ulps
# in float32 and 24 in float64; the bounds leave a little room.
INIT_ULPS = {"f32": 8, "f64": 64}


def check_initializer(v, what, ours, theirs, distribution):
    if distribution == "uniform":
        v.same_bits(what, ours, theirs)
        return
    within_ulps(v, what, ours, theirs, INIT_ULPS[TAG])


def distribution_of(init):
    if init.startswith("vs:"):
        return init.split(":")[3]
    return "uniform" if init.endswith("uniform") else "truncated_normal"


def check_init(v, rec):
    for name in sorted(n for n in rec if n.startswith("w|")):
        _, init, shape = name.split("|")
        rows, cols = (int(d) for d in shape.split("x"))
        f = jax_initializer(init, in_axis=-1, out_axis=-2)
        theirs = np.asarray(f(wrap(rec[f"key|{init}|{shape}"]), (rows, cols), DTYPE))
        check_initializer(v, f"{TAG} {init} ({rows}, {cols}) vs jax.nn.initializers(in_axis=-1, "
                          "out_axis=-2)", rec[name], theirs, distribution_of(init))

    # The layer. nnx.Linear draws its kernel from rngs.params() = fold_in(key, 0), which is
    # split(key)[0], the key grove's dense layer draws w from; flax's initializer for the (in, out)
    # kernel has fan_in = in and fan_out = out, as grove's for the (out, in) weight. JAX's draws
    # depend on the flat index only, not the shape, so grove's w holds flax's kernel's numbers in
    # the same flat order: w (out, in) row-major is kernel.reshape(out, in), not kernel.T (grove's
    # weight from a key is not the transpose of flax's kernel from it).
    transposed_equal = []
    for name in sorted(n for n in rec if n.startswith("layer_w|")):
        _, init, shape = name.split("|")
        out, inp = (int(d) for d in shape.split("x"))
        kernel_init = nnx.initializers.lecun_normal() if init == "default" else jax_initializer(init)
        layer = nnx.Linear(inp, out, kernel_init=kernel_init, param_dtype=DTYPE,
                           rngs=nnx.Rngs(params=wrap(rec[f"layer_key|{init}|{shape}"])))
        kernel = np.asarray(layer.kernel[...])
        bias = np.asarray(layer.bias[...])
        what = f"{TAG} nn::dense({inp}, {out}{'' if init == 'default' else ', ' + init}).init"
        check_initializer(v, f"{what} w vs nnx.Linear kernel.reshape(out, in)", rec[name],
                          kernel.reshape(out, inp),
                          "truncated_normal" if init == "default" else distribution_of(init))
        v.same_bits(f"{what} b vs nnx.Linear bias", rec[f"layer_b|{init}|{shape}"], bias)
        transposed_equal.append(np.array_equal(rec[name], kernel.T))
    v.note(f"{TAG} grove's w equals nnx.Linear's kernel.T in {sum(transposed_equal)} of "
           f"{len(transposed_equal)} layers")


# grove and flax (use_fast_variance=False) compute the same two-pass formula in different orders.
# An example's output moves by the rounding of its mean divided by its standard deviation, so the
# bound on each example's difference, in ulps of its largest output, is LN_ULPS plus three times its
# condition number max|x| / std(x) (measured: at most 6.5 ulps in float32 and 3 in float64 on
# centred inputs, 1.5 times the condition number on the inputs with a mean of 100 over a spread
# of 0.01).
LN_ULPS = 16


def layer_norms(params, x, eps):
    """flax's LayerNorm three ways: two-pass variance, its default (fast) variance, and without
    scale and bias."""
    two_pass = nn.LayerNorm(epsilon=eps, use_fast_variance=False, param_dtype=DTYPE)
    fast = nn.LayerNorm(epsilon=eps, param_dtype=DTYPE)
    plain = nn.LayerNorm(epsilon=eps, use_fast_variance=False, use_scale=False, use_bias=False,
                         param_dtype=DTYPE)
    return (two_pass.apply({"params": params}, x), fast.apply({"params": params}, x),
            plain.apply({}, x), two_pass.init(jax.random.key(0), x)["params"])


def check_layer_norm(v, rec):
    ids = sorted({n.split("|")[1] for n in rec if n.startswith("x|")}, key=int)
    xs = [np.ascontiguousarray(rec[f"x|{i}"].T) for i in ids]  # (batch, features)
    eps_of = [float(rec[f"eps|{i}"][0]) for i in ids]
    all_params = [{"scale": rec[f"scale|{i}"], "bias": rec[f"bias|{i}"]} for i in ids]
    # Every case in one jax.jit (one compilation).
    results = jax.tree.map(np.asarray, jax.jit(
        lambda ps, xs: [layer_norms(p, x, e) for p, x, e in zip(ps, xs, eps_of)])(all_params, xs))
    for i, x, eps, params, result in zip(ids, xs, eps_of, all_params, results):
        ours = np.ascontiguousarray(rec[f"y|{i}"].T)
        what = f"{TAG} layer_norm({x.shape[1]}, eps={eps}) on a batch of {x.shape[0]}"
        two_pass, fast, plain, flax_init = result
        std = np.std(x.astype(np.float64), axis=1, keepdims=True)
        condition = np.where(std > 0, np.abs(x).max(axis=1, keepdims=True) / np.maximum(std, 1e-300), 0)
        # grove computes the variance in two passes, mean((x - mean)^2): flax's
        # use_fast_variance=False.
        check_ln_output(v, what + " vs flax LayerNorm(use_fast_variance=False)", ours, two_pass,
                        condition)
        if condition.max() < 10:
            # flax's default E[x^2] - E[x]^2 loses digits when the mean is large against the
            # spread; on centred inputs it agrees to rounding as well.
            check_ln_output(v, what + " vs flax LayerNorm() (fast variance)", ours, fast, condition)
        else:
            d = float(np.abs(ours - fast).max())
            v.note(f"{what}: condition {condition.max():.3g}: flax's default fast variance is "
                   f"{d:.3g} away from the two-pass result (not compared)")
        if rec[f"init|{i}"] == "grove":
            # grove's init is flax's, and with it the layer is flax's without scale and bias.
            v.same_bits(f"{what}: grove's init scale vs flax's", params["scale"], flax_init["scale"])
            v.same_bits(f"{what}: grove's init bias vs flax's", params["bias"], flax_init["bias"])
            check_ln_output(v, what + " with init params vs flax LayerNorm(use_scale=False, "
                            "use_bias=False)", ours, plain, condition)


def check_ln_output(v, what, ours, theirs, condition):
    """Per example: the largest difference in ulps of the example's largest output, within
    LN_ULPS + 3 * condition."""
    if not v.expect(ours.shape == theirs.shape and ours.dtype == theirs.dtype,
                    f"{what}: {ours.dtype}{ours.shape} vs {theirs.dtype}{theirs.shape}"):
        return
    ulp = np.spacing(np.abs(theirs).max(axis=1, keepdims=True)).astype(np.float64)
    d = np.abs(ours.astype(np.float64) - theirs.astype(np.float64)) / ulp
    limit = LN_ULPS + 3 * condition
    worst = int(np.argmax((d - limit).max(axis=1)))
    exact = int(np.count_nonzero(ours != theirs))
    if v.expect(bool(np.isfinite(ours).all()) and bool((d <= limit).all()),
                f"{what}: example {worst} {d[worst].max():.1f} ulps of its largest output apart "
                f"(limit {limit[worst, 0]:.1f})"):
        print(f"{what}: {ours.size} values, at most {d.max():.2f} ulps (of the example's largest "
              f"output) apart, {exact} not bit for bit; condition {condition.max():.3g}, limit "
              f"{limit.max():.1f}")


def make_dropout(rate, key):
    """flax's Dropout(rate) in a training pass with the given key, as a function of the batch."""
    if not X64:
        layer = nn.Dropout(rate, deterministic=False)
        return lambda a: layer.apply({}, a, rng=key)
    # Under jax_enable_x64 flax's Dropout draws its mask from float64 uniforms (it passes the
    # Python float 1 - rate to jax.random.bernoulli, whose dtype is then float64), so its masks
    # are not those of float32 JAX. grove's are float32 JAX's in either precision:
    # bernoulli(key, float32(keep)), and the kept values scaled as flax scales them.
    keep32 = np.float32(1.0 - rate)

    def dropout(a):
        if rate == 0:
            return a
        mask = jax.random.bernoulli(key, keep32, a.shape)
        return lax.select(mask, a / float(keep32), jnp.zeros_like(a))
    return dropout


def check_dropout(v, rec):
    ids = sorted({n.split("|")[1] for n in rec if n.startswith("x|")}, key=int)
    ref = "flax.linen.Dropout" if not X64 else "bernoulli(key, float32(keep)) as flax selects"
    cases = []
    for i in ids:
        key = wrap(rec[f"key|{i}"])
        rate = float(rec[f"rate|{i}"][0])
        x, dy, y, dx = (np.ascontiguousarray(rec[f"{n}|{i}"].T) for n in ("x", "dy", "y", "dx"))
        cases.append((f"{TAG} dropout({rate}) of a ({x.shape[0]}, {x.shape[1]}) batch", rate, key,
                      x, dy, y, dx))

    # Every case's forward pass and vector-Jacobian product in one jax.jit (one compilation),
    # and under x64 flax's own Dropout too.
    def all_cases(xs, dys):
        out = []
        for (_, rate, key, *_), a, g in zip(cases, xs, dys):
            forward, vjp = jax.vjp(make_dropout(rate, key), a)
            own = nn.Dropout(rate, deterministic=False).apply({}, a, rng=key)
            out.append((forward, vjp(g)[0], own))
        return out
    jitted = jax.jit(all_cases)([c[3] for c in cases], [c[4] for c in cases])

    for (what, rate, key, x, dy, y, dx), (theirs, theirs_dx, flax64) in zip(cases, jitted):
        # flax's x / keep is, under XLA (eagerly and under jax.jit alike), x times the rounded
        # reciprocal of keep; grove computes that product.
        theirs = np.asarray(theirs)
        v.same_bits(f"{what}: mask (kept elements) vs {ref}", y != 0, theirs != 0)
        v.same_bits(f"{what}: output vs {ref}", y, theirs)
        v.same_bits(f"{what}: vjp vs jax.vjp of {ref}", dx, np.asarray(theirs_dx))
        if not X64:
            # nnx's, called eagerly as a user calls it.
            other = nnx.Dropout(rate)(jnp.asarray(x), rngs=key)
            v.same_bits(f"{what}: output vs nnx.Dropout", y, np.asarray(other))
        elif rate > 0:
            flax64 = np.asarray(flax64)
            v.note(f"{what}: flax's own Dropout under x64 keeps {np.count_nonzero(flax64)} "
                   f"elements; its mask differs from grove's (float32 JAX's) in "
                   f"{np.count_nonzero((flax64 != 0) != (y != 0))} of {y.size}")


def within_ulps(v, what, ours, theirs, limit):
    if not v.expect(ours.shape == theirs.shape and ours.dtype == theirs.dtype,
                    f"{what}: {ours.dtype}{ours.shape} vs {theirs.dtype}{theirs.shape}"):
        return
    d = ulps(ours, theirs)
    if v.expect(int(d.max()) <= limit, f"{what}: {int(d.max())} ulps apart (limit {limit})"):
        print(f"{what}: {d.size} values, at most {int(d.max())} ulps apart, "
              f"{np.count_nonzero(d)} not bit for bit; limit {limit}")


# --- models ----------------------------------------------------------------------------------


def dense(P, at, h):
    w, b = P[at + ".w"], P[at + ".b"]
    return nn.Dense(w.shape[0]).apply({"params": {"kernel": w.T, "bias": b}}, h)


def layer_norm(P, at, h, eps):
    ln = nn.LayerNorm(epsilon=eps, use_fast_variance=False, param_dtype=DTYPE)
    return ln.apply({"params": {"scale": P[at + ".scale"], "bias": P[at + ".bias"]}}, h)


def model_a(P, x, key):
    """flax_driver.cpp's model A: x is (batch, 6)."""
    h = jax.nn.swish(dense(P, "[0]", x))
    r = layer_norm(P, "[2][0]", h, 1e-5)
    h = h + jax.nn.gelu(dense(P, "[2][1]", r))  # approximate=True, JAX's default and grove's
    if key is not None:
        # The layer at [3] draws from fold_in(the pass's key, 3) (docs/nn.md, "Keys").
        h = nn.Dropout(0.25, deterministic=False).apply({}, h, rng=jax.random.fold_in(key, 3))
    r = jnp.tanh(dense(P, "[4][0]", h))
    h = h + jax.nn.gelu(dense(P, "[4][2]", r), approximate=False)
    h = layer_norm(P, "[5]", h, 1e-6)
    h = jax.nn.elu(dense(P, "[6]", h))
    return dense(P, "[8]", h)


def model_b(P, x):
    h = jax.nn.relu(dense(P, "[0]", x))
    h = jax.nn.leaky_relu(dense(P, "[2]", h))  # negative_slope 0.01, grove's
    h = jax.nn.sigmoid(dense(P, "[4]", h))
    h = jax.nn.softplus(dense(P, "[6]", h))
    h = dense(P, "[8]", h)  # identity
    return dense(P, "[10]", h)


MODEL_RTOL = {"f32": 1e-5, "f64": 1e-12}


def relative_error(ours, theirs):
    return float(np.abs(ours.astype(np.float64) - theirs).max() / np.abs(theirs).max())


def compare(v, what, ours, theirs, figures):
    theirs = np.asarray(theirs, dtype=np.float64)
    if not v.expect(ours.shape == theirs.shape, f"{what}: shapes {ours.shape} and {theirs.shape}"):
        return
    e = relative_error(ours, theirs)
    figures.append(e)
    v.expect(bool(np.isfinite(ours).all()) and e <= MODEL_RTOL[TAG],
             f"{what}: relative error {e:.3g} (limit {MODEL_RTOL[TAG]})")


def check_model(v, rec):
    rtol = MODEL_RTOL[TAG]
    PA = {n[len("A:p"):]: jnp.asarray(a) for n, a in rec.items() if n.startswith("A:p")}
    PB = {n[len("B:p"):]: jnp.asarray(a) for n, a in rec.items() if n.startswith("B:p")}
    xa, ya = jnp.asarray(rec["A:x"].T), jnp.asarray(rec["A:y"].T)
    key = wrap(rec["A:key"]) if rec["A:dropout"] == "on" else None
    xb, labels = jnp.asarray(rec["B:x"].T), jnp.asarray(rec["B:labels"])

    def loss_a(P, x):
        return jnp.mean(jnp.square(model_a(P, x, key) - ya))

    def loss_b(P, x):
        return optax.softmax_cross_entropy_with_integer_labels(model_b(P, x), labels).mean()

    # Both models in one jax.jit (one compilation).
    (la, (ga, gxa)), (lb, (gb, gxb)) = jax.jit(lambda PA, xa, PB, xb: (
        jax.value_and_grad(loss_a, argnums=(0, 1))(PA, xa),
        jax.value_and_grad(loss_b, argnums=(0, 1))(PB, xb)))(PA, xa, PB, xb)
    dropout = " with dropout" if key is not None else ""
    for t in rec["threads"]:
        t = int(t)
        figures = {}
        for model, loss, grads, gx, kinds in (
                ("A", la, ga, gxa, ("",)), ("B", lb, gb, gxb, ("", "fused_"))):
            for kind in kinds:
                what = f"{TAG} {t} thread(s) model {model}{dropout if model == 'A' else ''}" \
                       f"{' (fused engine)' if kind else ''}"
                fig = figures.setdefault(what, [])
                compare(v, f"{what} loss", rec[f"t{t}:{model}:{kind}loss"], np.asarray(loss).reshape(1), fig)
                for path, g in grads.items():
                    compare(v, f"{what} grad {path}", rec[f"t{t}:{model}:{kind}g{path}"], g, fig)
                if not kind:
                    compare(v, f"{what} input grad", rec[f"t{t}:{model}:dx"], np.asarray(gx).T, fig)
        for what, fig in figures.items():
            v.note(f"{what}: loss, {len(fig) - 1} gradients vs jax.value_and_grad: largest relative "
                   f"error {max(fig):.3g} (limit {rtol})")


CHECKS = {"init": ("init", check_init), "layer_norm": ("layer_norm", check_layer_norm),
          "dropout": ("dropout", check_dropout), "model_grads": ("model", check_model)}


def main():
    if len(ARGS) != 2 or ARGS[1] not in CHECKS:
        sys.exit(f"usage: flax_oracle.py DRIVER {'|'.join(CHECKS)} [--x64]")
    driver, case = ARGS
    driver_case, check = CHECKS[case]
    v = oracle_common.Verdict(f"flax {case} {TAG}")
    check(v, oracle_common.run_driver(driver, driver_case, TAG))
    if not X64:
        sys.stdout.flush()
        child = subprocess.run([sys.executable, os.path.abspath(__file__), driver, case, "--x64"])
        v.expect(child.returncode == 0, f"the float64 half (--x64) failed (exit {child.returncode})")
    v.finish()


if __name__ == "__main__":
    main()
