"""grove::optim against optax itself (the pinned optax in the oracle environment).

Usage: optax_oracle.py DRIVER GROUP, GROUP one of
  transforms  scale, scale_by_schedule, scale_by_learning_rate (constant; schedule without the
              sign flip), scale_by_adam, scale_by_rms, scale_by_rss, scale_by_lion, trace (plain,
              nesterov), add_decayed_weights (plain, masked), clip, clip_by_global_norm, with
              arguments away from the defaults and, separately, with the defaults; and the tree
              utilities global_norm, squared_global_norm, tree_full_like, tree_zeros_like,
              tree_all_finite
  aliases     sgd (plain, momentum, nesterov, schedule), adam, adamw (with a mask tree, a mask
              function and a schedule), rmsprop, adagrad, lion, each also with optax's defaults
  wrappers    chain (fused, the issue's chain(clip_by_global_norm, adamw(schedule, ..., mask)),
              and one that cannot be fused), masked (prefix mask, full mask, mask function),
              multi_steps (adam, a scheduled sgd, a chain), apply_if_finite (skipping NaN and
              infinite steps, giving up, around multi_steps)
  schedules   every schedule's value at 0..300 and at large counts

For the optimizer groups this script draws a start and 50 steps of gradients (numpy's PCG64,
seed fixed) for the pytree ({'k': 4x3, 'q': 2x5}, v: (6,), s: ()), writes them for the driver
in float32 and in float64, and runs optax on the same: 50 steps of tx.update then
optax.apply_updates (jitted, every case of the group in one function). Within 1e-6 (float32) /
1e-12 (float64) of optax's must be: grove's updates (from update), relative to the step's largest
update; its parameters after apply_updates and after the fused step, each element relative to
the largest magnitude it has had (see step_scale and running_scale for why not relative to the
element itself). Non-finite values must sit at the same places with the same values, and the
states' counts (schedule counts, adam's and lion's, multi_steps' mini_step / gradient_step /
has_updated, apply_if_finite's three) must be equal after every step. float32 runs with JAX's
default of 32-bit types (as a float32 training runs), float64 under jax.enable_x64, schedules on
int64 counts there (see widen). XLA runs without fused multiply-adds, as grove's driver is built.
The schedules group: grove's doubles against optax's under enable_x64, to 1e-12.
"""
import os
import sys
import tempfile
import time
from pathlib import Path

# XLA's CPU compiler contracts a * b + c into fused multiply-adds where the machine has them, and
# grove's driver is built without (no -march): at most AVX, so that both sides round every
# operation of optax's formulas as written (else a moment that crosses 0 differs by far more
# than 1e-6 of itself). Set before JAX starts.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_max_isa=AVX").strip()

import numpy as np

import jax
import jax.numpy as jnp
import optax

import oracle_common as oc

STEPS = 50
SHAPES = {"k": (4, 3), "q": (2, 5), "v": (6,), "s": ()}
RTOL = {"f4": 1e-6, "f8": 1e-12}
NP_DTYPE = {"f4": np.float32, "f8": np.float64}


# --- inputs ---------------------------------------------------------------------------------------

def draw_inputs():
    """The start, the gradients and the gradients with non-finite steps, in float64."""
    rng = np.random.default_rng(20261204)
    p0 = {leaf: rng.normal(size=shape) for leaf, shape in SHAPES.items()}
    # Each step's gradients scaled by a factor in [0.3, 1.7], so that the global norm (about 5.4
    # unscaled) falls on both sides of clip_by_global_norm(5) and of the chains' thresholds.
    scales = rng.uniform(0.3, 1.7, size=STEPS)
    g = {leaf: rng.normal(size=(STEPS,) + shape) * scales.reshape((STEPS,) + (1,) * len(shape))
         for leaf, shape in SHAPES.items()}
    nan = {leaf: a.copy() for leaf, a in g.items()}
    nan["k"][3, 1, 2] = np.nan            # one non-finite step
    nan["v"][10, 4] = np.inf              # two in a row (and a NaN beside an infinity)
    nan["s"][10] = np.nan
    nan["s"][11] = np.nan
    for step in (20, 21, 22):             # three in a row
        nan["q"][step, 1, 3] = -np.inf
    for step in (30, 31, 32, 33):         # four in a row
        nan["k"][step, 0, 0] = np.nan
    nan["s"][45] = np.inf
    return p0, g, nan


def records_for(p0, g, nan, dtype):
    out = {}
    for leaf in SHAPES:
        out[f"p0.{leaf}"] = p0[leaf].astype(NP_DTYPE[dtype])
        out[f"g.{leaf}"] = g[leaf].astype(NP_DTYPE[dtype])
        out[f"nan.{leaf}"] = nan[leaf].astype(NP_DTYPE[dtype])
    return out


def tree(leaves, dtype, step=None):
    """The pytree ({'k', 'q'}, v, s) of JAX arrays, from leaf -> array (one step of stacked ones)."""
    pick = (lambda a: a) if step is None else (lambda a: a[step])
    x = {leaf: jnp.asarray(pick(a), dtype=NP_DTYPE[dtype]) for leaf, a in leaves.items()}
    return ({"k": x["k"], "q": x["q"]}, x["v"], x["s"])


def leaves_of(t):
    (d, v, s) = t
    return {"k": d["k"], "q": d["q"], "v": v, "s": s}


# --- the cases: the same names and hyperparameters as tests/oracle/optax_driver.cpp ---------------

PREFIX_MASK = (True, False, True)
FULL_MASK = ({"k": True, "q": False}, True, False)


def matrices_mask(p):
    return jax.tree.map(lambda x: x.ndim == 2, p)


def no_counts(s):
    return []


def count(s):
    return [s.count]


def widen(dt):
    """In float64, a schedule evaluated on an int64 count. optax's states count in int32, and
    under enable_x64 JAX divides an int32 by an int in float32: optax's linear, polynomial and
    warmup-cosine schedules on its own counts have float32's precision (2e-7) even in a float64
    run, where grove computes every schedule in double. The schedules' formulas are compared in
    double that way; float32 runs keep optax's int32 counts, as a float32 training does."""
    if dt != "f8":
        return lambda fn: fn
    return lambda fn: (lambda count: fn(jnp.asarray(count, jnp.int64)))


def transforms(dt):
    w = widen(dt)
    return {
        "scale": (optax.scale(-0.37), no_counts),
        "scale_by_schedule": (optax.scale_by_schedule(w(optax.polynomial_schedule(0.5, 0.01, 2.0, 40, 5))),
                              count),
        "scale_by_learning_rate": (optax.scale_by_learning_rate(0.03), no_counts),
        "scale_by_learning_rate_schedule_no_flip": (
            optax.scale_by_learning_rate(w(optax.cosine_decay_schedule(0.2, 30, 0.1, 1.5)), flip_sign=False),
            count),
        "scale_by_adam": (optax.scale_by_adam(b1=0.8, b2=0.95, eps=1e-3, eps_root=1e-5), count),
        "scale_by_adam_defaults": (optax.scale_by_adam(), count),
        "scale_by_rms": (optax.scale_by_rms(decay=0.7, eps=1e-4, initial_scale=0.5), no_counts),
        "scale_by_rms_defaults": (optax.scale_by_rms(), no_counts),
        "scale_by_rss": (optax.scale_by_rss(initial_accumulator_value=0.3, eps=1e-4), no_counts),
        "scale_by_rss_defaults": (optax.scale_by_rss(), no_counts),
        "scale_by_lion": (optax.scale_by_lion(b1=0.7, b2=0.95), count),
        "scale_by_lion_defaults": (optax.scale_by_lion(), count),
        "trace": (optax.trace(decay=0.6), no_counts),
        "trace_nesterov": (optax.trace(decay=0.6, nesterov=True), no_counts),
        "add_decayed_weights": (optax.add_decayed_weights(0.07), no_counts),
        "add_decayed_weights_defaults": (optax.add_decayed_weights(), no_counts),
        "add_decayed_weights_mask": (optax.add_decayed_weights(0.07, mask=PREFIX_MASK), no_counts),
        "clip": (optax.clip(0.8), no_counts),
        "clip_by_global_norm": (optax.clip_by_global_norm(5.0), no_counts),
    }


def aliases(dt):
    w = widen(dt)
    lr_count = lambda s: [s[1].count]
    adam_count = lambda s: [s[0].count]
    adam_counts = lambda s: [s[0].count, s[2].count]
    return {
        "sgd": (optax.sgd(0.05), no_counts),
        "sgd_momentum": (optax.sgd(0.05, momentum=0.85), no_counts),
        "sgd_nesterov": (optax.sgd(0.05, momentum=0.85, nesterov=True), no_counts),
        "sgd_schedule": (optax.sgd(w(optax.exponential_decay(0.1, 7.0, 0.6, 3, True, 0.02)), momentum=0.7),
                         lr_count),
        "adam": (optax.adam(0.01, b1=0.85, b2=0.99, eps=1e-6, eps_root=1e-8), adam_count),
        "adam_defaults": (optax.adam(0.01), adam_count),
        "adam_schedule": (optax.adam(w(optax.warmup_cosine_decay_schedule(0.001, 0.02, 8, 45, 0.002, 1.3)),
                                     b1=0.85, b2=0.99, eps=1e-6),
                          lambda s: [s[0].count, s[1].count]),
        "adamw": (optax.adamw(0.01, b1=0.85, b2=0.99, eps=1e-6, eps_root=1e-8, weight_decay=0.05),
                  adam_count),
        "adamw_defaults": (optax.adamw(0.01), adam_count),
        "adamw_mask": (optax.adamw(0.01, b1=0.85, b2=0.99, eps=1e-6, eps_root=0.0, weight_decay=0.05,
                                   mask=FULL_MASK), adam_count),
        "adamw_mask_fn": (optax.adamw(w(optax.linear_schedule(0.02, 0.002, 40, 5)), b1=0.8, b2=0.97, eps=1e-7,
                                      eps_root=0.0, weight_decay=0.1, mask=matrices_mask), adam_counts),
        "rmsprop": (optax.rmsprop(0.01, decay=0.8, eps=1e-5, initial_scale=0.2), no_counts),
        "rmsprop_defaults": (optax.rmsprop(0.01), no_counts),
        "adagrad": (optax.adagrad(0.1, initial_accumulator_value=0.2, eps=1e-5), no_counts),
        "adagrad_defaults": (optax.adagrad(0.1), no_counts),
        "lion": (optax.lion(0.003, b1=0.8, b2=0.95, weight_decay=0.02), adam_count),
        "lion_defaults": (optax.lion(0.003), adam_count),
        "lion_schedule": (optax.lion(w(optax.piecewise_constant_schedule(0.01, {20: 0.3}))), adam_counts),
    }


def wrappers(dt):
    w = widen(dt)
    acc = NP_DTYPE[dt]  # grove accumulates in the parameters' type (optax's default: float32)

    def multi(ms, inner_counts):
        return lambda s: [s.mini_step, s.gradient_step, ms.has_updated(s)] + inner_counts(s.inner_opt_state)

    def finite(inner_counts):
        return lambda s: [s.notfinite_count, s.last_finite, s.total_notfinite] + inner_counts(s.inner_state)

    ms_adam = optax.MultiSteps(optax.adam(0.02, b1=0.8, b2=0.95, eps=1e-6), 4, accumulator_dtype=acc)
    ms_sgd = optax.MultiSteps(optax.sgd(w(optax.linear_schedule(0.1, 0.01, 10, 2)), momentum=0.9), 3,
                              accumulator_dtype=acc)
    ms_chain = optax.MultiSteps(
        optax.chain(optax.clip_by_global_norm(4.0),
                    optax.adamw(0.01, b1=0.85, b2=0.99, eps=1e-6, eps_root=0.0, weight_decay=0.05,
                                mask=PREFIX_MASK)), 5, accumulator_dtype=acc)
    ms_in = optax.MultiSteps(optax.adamw(0.01, b1=0.8, b2=0.95, eps=1e-6, eps_root=0.0, weight_decay=0.02),
                             3, accumulator_dtype=acc)
    return {
        "chain": (optax.chain(optax.clip(1.0), optax.trace(0.5, nesterov=True), optax.scale(-0.1)), no_counts),
        "chain_clip_adamw": (
            optax.chain(optax.clip_by_global_norm(5.0),
                        optax.adamw(w(optax.warmup_cosine_decay_schedule(0.0, 0.05, 5, 80, 0.001)), b1=0.8,
                                    b2=0.97, eps=1e-7, eps_root=0.0, weight_decay=0.03, mask=FULL_MASK)),
            lambda s: [s[1][0].count, s[1][2].count]),
        "chain_unfused": (optax.chain(optax.scale_by_adam(0.85, 0.98), optax.clip_by_global_norm(3.0),
                                      optax.scale(-0.02)), lambda s: [s[0].count]),
        "masked_prefix": (optax.masked(optax.chain(optax.scale_by_adam(0.8, 0.9), optax.scale(-0.05)),
                                       PREFIX_MASK), lambda s: [s.inner_state[0].count]),
        "masked_full": (optax.masked(optax.trace(0.5, nesterov=True), FULL_MASK), no_counts),
        "masked_fn": (optax.masked(optax.scale_by_rms(0.8, 1e-6), matrices_mask), no_counts),
        "multi_steps": (ms_adam.gradient_transformation(), multi(ms_adam, lambda s: [s[0].count])),
        "multi_steps_schedule": (ms_sgd.gradient_transformation(), multi(ms_sgd, lambda s: [s[1].count])),
        "multi_steps_chain": (ms_chain.gradient_transformation(),
                              multi(ms_chain, lambda s: [s[1][0].count])),
        "apply_if_finite": (optax.apply_if_finite(optax.adam(0.01, b1=0.85, b2=0.99), 3),
                            finite(lambda s: [s[0].count])),
        "apply_if_finite_gives_up": (optax.apply_if_finite(optax.sgd(0.05, momentum=0.9), 1), finite(no_counts)),
        # Skips every run (the longest is 4): once a NaN is inside optax's MultiSteps, its
        # `emit * updates` is NaN on the mini steps that do not emit, where grove's are zeros.
        "apply_if_finite_multi_steps": (optax.apply_if_finite(ms_in.gradient_transformation(), 4),
                                        finite(multi(ms_in, lambda s: [s[0].count]))),
    }


# What optax's counts must show for a case to test what it is meant to (the inputs reach the
# branch): case -> (test of the (steps, n) counts, what it checks).
REACHES = {
    "multi_steps": (lambda c: int(c[:, 2].sum()) == STEPS // 4, "has_updated every 4th step"),
    "multi_steps_schedule": (lambda c: int(c[-1, 3]) == STEPS // 3, "the schedule's count advances once per 3"),
    "apply_if_finite": (lambda c: int(c[-1, 2]) == 11 and int(c[:, 0].max()) == 4,
                        "11 non-finite steps, a run of 4 (more than 3: applied)"),
    "apply_if_finite_gives_up": (lambda c: int(c[:, 0].max()) >= 2, "runs longer than 1 (applied)"),
    "apply_if_finite_multi_steps": (lambda c: int(c[-1, 2]) == 11 and int(c[:, 4].sum()) > 0,
                                    "11 non-finite steps skipped, multi_steps updating"),
}

# The cases that run on the gradients with NaN and infinite steps.
ON_NAN = {"apply_if_finite", "apply_if_finite_gives_up", "apply_if_finite_multi_steps"}
GROUPS = {"transforms": transforms, "aliases": aliases, "wrappers": wrappers}


def run_optax(cases, p0, g, nan, dt):
    """50 steps of every case of a group in optax: name -> (updates, parameters, counts), the
    first two leaf -> (steps, ...) arrays, after each step. All the cases' updates and
    apply_updates of one step are one jitted function (compiling one per case would take most
    of the test's time)."""
    names = list(cases)
    txs = [cases[n][0] for n in names]
    counts_of = [cases[n][1] for n in names]
    on_nan = [n in ON_NAN for n in names]

    def step(states, params, grads, nan_grads):
        updates, new_states, new_params, counts = [], [], [], []
        for tx, count, bad, state, p in zip(txs, counts_of, on_nan, states, params):
            u, state = tx.update(nan_grads if bad else grads, state, p)
            updates.append(u)
            new_states.append(state)
            new_params.append(optax.apply_updates(p, u))
            counts.append([jnp.asarray(c).astype(jnp.int32) for c in count(state)])
        return updates, new_states, new_params, counts

    step = jax.jit(step)
    params = [tree(p0, dt) for _ in names]
    states = [tx.init(p) for tx, p in zip(txs, params)]
    per_step = []
    for i in range(STEPS):
        updates, states, params, counts = step(states, params, tree(g, dt, i), tree(nan, dt, i))
        per_step.append(jax.device_get((updates, params, counts)))
    out = {}
    for k, name in enumerate(names):
        stack = lambda which: {leaf: np.stack([np.asarray(leaves_of(s[which][k])[leaf]) for s in per_step])
                               for leaf in SHAPES}
        counts = np.array([[int(c) for c in s[2][k]] for s in per_step], dtype=np.int64).reshape(STEPS, -1)
        out[name] = (stack(0), stack(1), counts)
    return out


# --- comparisons ----------------------------------------------------------------------------------

def relative_difference(ours, theirs, scale=None):
    """The largest |ours - theirs| / |theirs| (or / scale) over the finite elements (0 where both
    are 0), whether the non-finite elements agree (the same places, the same values), and how many
    there are."""
    ours = np.asarray(ours, dtype=np.float64)
    theirs = np.asarray(theirs, dtype=np.float64)
    finite = np.isfinite(theirs)
    same_nonfinite = np.array_equal(np.isfinite(ours), finite) and np.array_equal(
        ours[~finite], theirs[~finite], equal_nan=True)
    o, t = ours[finite], theirs[finite]
    s = np.abs(t) if scale is None else np.asarray(scale, dtype=np.float64)[finite]
    diff = np.abs(o - t)
    rel = np.where(diff == 0, 0.0, diff / np.maximum(s, np.finfo(np.float64).tiny))
    return (float(rel.max()) if rel.size else 0.0), same_nonfinite, int(np.count_nonzero(~finite))


def running_scale(start, trajectory):
    """Each element's largest magnitude so far, the start included: the size of the numbers its
    sum of updates has been through, which bounds what rounding can have left in it. (An element
    that passes near 0 keeps the absolute rounding of its larger past, so relative to itself it
    would be off by far more than an ulp in both libraries.)"""
    a = np.abs(np.where(np.isfinite(trajectory), trajectory, 0.0)).astype(np.float64)
    a = np.maximum(a, np.abs(np.asarray(start, dtype=np.float64)))
    return np.maximum.accumulate(a, axis=0)


def step_scale(tree_of_steps):
    """Each step's largest finite magnitude over the whole tree (the updates' infinity norm), per
    element. A sum like AdamW's adam + weight_decay * p, or a moment that crosses 0, can be far
    smaller than its terms, and its rounding is the terms' (XLA also rounds some divisions
    differently: it multiplies by the reciprocal of a broadcast scalar, e.g. multi_steps' 1 / (n +
    1)), so an update is compared relative to the step's largest one."""
    per_step = np.zeros(STEPS)
    for a in tree_of_steps.values():
        a = np.abs(np.where(np.isfinite(a), a, 0.0)).reshape(STEPS, -1).astype(np.float64)
        per_step = np.maximum(per_step, a.max(axis=1))
    return {leaf: np.broadcast_to(per_step.reshape((STEPS,) + (1,) * (a.ndim - 1)), a.shape)
            for leaf, a in tree_of_steps.items()}


def compare_trees(v, what, ours, prefix, theirs, rtol, start=None):
    """Every leaf of grove's records PREFIX.LEAF against optax's; the largest relative difference.
    Updates are compared relative to the step's largest update (step_scale); with `start`, a
    trajectory of parameters, each element relative to its running scale (running_scale)."""
    worst = 0.0
    nonfinite = 0
    scales = step_scale(theirs) if start is None else None
    for leaf in SHAPES:
        name = f"{prefix}.{leaf}"
        o = ours.get(name)
        if not v.expect(o is not None, f"{what}: the driver wrote no record {name}"):
            continue
        if not v.expect(o.shape == theirs[leaf].shape,
                        f"{what}: {name} has shape {o.shape}, optax's {theirs[leaf].shape}"):
            continue
        scale = scales[leaf] if start is None else running_scale(start[leaf], theirs[leaf])
        rel, same, n = relative_difference(o, theirs[leaf], scale)
        nonfinite += n
        v.expect(same, f"{what}: {name}: the NaN / infinite elements differ from optax's")
        v.expect(rel <= rtol, f"{what}: {name}: relative difference {rel:.3g} to optax (limit {rtol:g})")
        worst = max(worst, rel)
    return worst, nonfinite


def compare_group(v, group, dt, ours, p0, g, nan):
    rtol = RTOL[dt]
    cases = GROUPS[group](dt)
    emitted = {name.split(".")[0] for name in ours if name.split(".")[1:2] == ["u"]}
    v.expect(emitted == set(cases),
             f"{group} {dt}: the driver's cases {sorted(emitted ^ set(cases))} are not the script's")
    worst_overall = 0.0
    results = run_optax(cases, p0, g, nan, dt)
    for name in cases:
        updates, trajectory, counts = results[name]
        what = f"{group} {dt} {name}"
        r_u, nf = compare_trees(v, what, ours, f"{name}.u", updates, rtol)
        start = {leaf: a.astype(NP_DTYPE[dt]) for leaf, a in p0.items()}
        r_pu, nf_p = compare_trees(v, what, ours, f"{name}.pu", trajectory, rtol, start)
        r_ps, _ = compare_trees(v, what, ours, f"{name}.ps", trajectory, rtol, start)
        for path in ("cu", "cs"):
            o = ours.get(f"{name}.{path}")
            v.expect(o is not None and o.shape == counts.shape and np.array_equal(o, counts),
                     f"{what}: counts {path} {None if o is None else o.tolist()} , optax's {counts.tolist()}")
        if name in REACHES:
            test, about = REACHES[name]
            v.expect(test(counts), f"{what}: optax's counts do not show {about}: {counts.tolist()}")
        worst_overall = max(worst_overall, r_u, r_pu, r_ps)
        extra = f"; {nf_p} non-finite parameters, as optax's" if nf_p else ""
        v.note(f"{what}: largest relative difference: updates {r_u:.2g}, parameters {r_pu:.2g} "
               f"(update + apply_updates), {r_ps:.2g} (step); counts {counts.shape[1]} x {STEPS} equal"
               f"{extra}")
    return worst_overall


def coverage(v, group, dt, p0, g, nan):
    """Checks that the inputs reach the branches the cases are meant to test."""
    norms = np.array([float(optax.global_norm(tree(g, dt, s))) for s in range(STEPS)])
    if group == "transforms":
        clipped = int(np.count_nonzero(norms >= 5.0))
        v.expect(0 < clipped < STEPS, f"clip_by_global_norm(5): {clipped} of {STEPS} steps clipped")
        v.note(f"{dt}: clip_by_global_norm(5) clips {clipped} of {STEPS} steps")
        v.expect(np.any(np.abs(g["k"]) > 0.8) and np.any(np.abs(g["k"]) < 0.8), "clip(0.8) never clips")


def compare_tree_utils(v, dt, ours, p0, g, nan):
    rtol = RTOL[dt]
    norms = np.array([float(optax.global_norm(tree(g, dt, s))) for s in range(STEPS)])
    squared = np.array([float(optax.tree.norm(tree(g, dt, s), squared=True)) for s in range(STEPS)])
    # optax sums the squares in the leaves' type, grove in double.
    for name, theirs in (("global_norm", norms), ("squared_global_norm", squared)):
        rel, same, _ = relative_difference(ours[f"tree_utils.{name}"], theirs)
        v.expect(same and rel <= rtol, f"{dt} {name}: relative difference {rel:.3g} (limit {rtol:g})")
        v.note(f"tree_utils {dt} {name}: {STEPS} norms, largest relative difference {rel:.2g}")
    p = tree(p0, dt)
    for name, theirs in (("full_like", optax.tree.full_like(p, 0.3)), ("zeros_like", optax.tree.zeros_like(p))):
        for leaf, t in leaves_of(theirs).items():
            v.same_bits(f"tree_utils {dt} tree_{name} {leaf}", np.atleast_1d(ours[f"tree_utils.{name}.{leaf}"][0]),
                        np.atleast_1d(np.asarray(t)))
    # apply_if_finite's own test of the updates.
    finite = np.array([bool(jnp.all(jnp.array([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree(nan, dt, s))])))
                       for s in range(STEPS)], dtype=np.int64)
    v.expect(np.array_equal(ours["tree_utils.all_finite"], finite),
             f"{dt} tree_all_finite: {ours['tree_utils.all_finite'].tolist()}, optax's test {finite.tolist()}")
    v.note(f"tree_utils {dt} tree_all_finite: {STEPS} trees ({STEPS - int(finite.sum())} not finite) as "
           f"apply_if_finite decides")


# --- schedules ------------------------------------------------------------------------------------

def schedules():
    return {
        "constant": optax.constant_schedule(0.37),
        "linear": optax.linear_schedule(0.3, 0.02, 40),
        "linear_begin": optax.linear_schedule(0.02, 0.3, 25, 10),
        "polynomial": optax.polynomial_schedule(0.5, 0.01, 2.0, 40, 5),
        "polynomial_sqrt": optax.polynomial_schedule(1.0, 0.1, 0.5, 60),
        "exponential": optax.exponential_decay(0.5, 7.0, 0.6),
        "exponential_staircase_begin_end": optax.exponential_decay(0.1, 7.0, 0.6, 3, True, 0.02),
        "exponential_growth_end": optax.exponential_decay(0.01, 5.0, 1.3, 0, False, 0.2),
        "exponential_fractional_steps": optax.exponential_decay(0.5, 2.5, 0.9),
        "cosine": optax.cosine_decay_schedule(0.2, 30),
        "cosine_alpha_exponent": optax.cosine_decay_schedule(0.2, 30, 0.1, 1.5),
        "warmup_cosine": optax.warmup_cosine_decay_schedule(0.001, 0.02, 8, 45, 0.002, 1.3),
        "warmup_cosine_defaults": optax.warmup_cosine_decay_schedule(0.0, 0.05, 5, 50),
        "warmup_cosine_no_warmup": optax.warmup_cosine_decay_schedule(0.0, 0.05, 0, 50, 0.001),
        "piecewise": optax.piecewise_constant_schedule(0.1, {30: 0.5, 10: 0.2, 70: 3.0}),
        "piecewise_empty": optax.piecewise_constant_schedule(0.1),
        "join": optax.join_schedules([optax.linear_schedule(0.0, 0.1, 10), optax.constant_schedule(0.1),
                                      optax.cosine_decay_schedule(0.1, 40, 0.05)], [10, 25]),
    }


def compare_schedules(v, driver, tmp):
    counts = np.concatenate([np.arange(0, 301), [307, 500, 999, 1000, 4096, 10**5, 10**6, 2**31 - 1]])
    counts = counts.astype(np.int64)
    path = Path(tmp) / "counts.rec"
    oc.write_records(path, {"counts": counts})
    ours = oc.run_driver(driver, "schedules", "f8", path)
    table = schedules()
    v.expect(set(ours) == set(table), f"the driver's schedules {sorted(set(ours) ^ set(table))} are not the script's")
    with jax.enable_x64(True):
        c = jnp.asarray(counts)
        for name, fn in table.items():
            theirs = np.broadcast_to(np.asarray(fn(c), dtype=np.float64), counts.shape)
            o = ours.get(name)
            if not v.expect(o is not None, f"no schedule {name} from the driver"):
                continue
            rel, same, _ = relative_difference(o, theirs)
            v.expect(same and rel <= RTOL["f8"],
                     f"schedule {name}: relative difference {rel:.3g} (limit {RTOL['f8']:g}); first counts "
                     f"grove {o[:4].tolist()}, optax {theirs[:4].tolist()}")
            distinct = len(np.unique(theirs))
            v.note(f"schedule {name}: {counts.size} counts ({distinct} distinct values), largest relative "
                   f"difference {rel:.2g}")


def main():
    driver, group = sys.argv[1], sys.argv[2]
    v = oc.Verdict(f"oracle_optax_{group}")
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        if group == "schedules":
            compare_schedules(v, driver, tmp)
        else:
            p0, g, nan = draw_inputs()
            for dt in ("f4", "f8"):
                path = Path(tmp) / f"inputs-{dt}.rec"
                oc.write_records(path, records_for(p0, g, nan, dt))
                ours = oc.run_driver(driver, group, dt, path)
                # float32 as JAX computes it by default; float64 needs 64-bit types on.
                with jax.enable_x64(dt == "f8"):
                    coverage(v, group, dt, p0, g, nan)
                    worst = compare_group(v, group, dt, ours, p0, g, nan)
                    if group == "transforms":
                        compare_tree_utils(v, dt, ours, p0, g, nan)
                v.note(f"{group} {dt}: largest relative difference over every case {worst:.2g} "
                       f"(limit {RTOL[dt]:g})")
    v.note(f"{time.time() - start:.1f} s")
    v.finish()


if __name__ == "__main__":
    main()
