#!/usr/bin/env python3
"""The MLP step in JAX next to grove's, as JSON for scripts/bench_report.py.

The same step as bench/torch_step.py's: the [784, 512, 512, 10] swish MLP, float32, softmax
cross-entropy, plain SGD (optax.sgd(1e-3)), as a JAX user writes it: one jax.jit of
jax.value_and_grad and the optax update, parameters and optimizer state donated to it (updated in
place), on XLA:CPU. grove's figure is bench_nn's step_sgd_fused at the same batch and threads.
JAX runs in a fresh process per thread budget, pinned to that many CPUs (XLA:CPU sizes its
thread pool from the CPUs the process may use; XLA_FLAGS has no thread count that it honours
here); rounds alternate grove and JAX and the medians are compared. Each step waits for its
result (block_until_ready), as grove's step returns with its parameters updated; compiling is
done before the timing.

    build/oracle-venv/bin/python bench/jax_step.py --bench build/bench/bench/bench_nn --out nn_jax.json

Runs in the test oracles' environment (scripts/oracle-env.sh: the pinned jax, jaxlib and optax).
JSON: {"jax", "jaxlib", "optax", "rows": [{"batch", "threads", "grove_ms", "jax_ms", "rounds"}]}.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402  (grove's timing and the shared timing loop)

SIZES = cp.SIZES


def pin_to(cpus):
    """Restricts this process to its first `cpus` allowed CPUs (before jax is imported)."""
    allowed = sorted(os.sched_getaffinity(0))
    if cpus > len(allowed):
        raise SystemExit(f"jax_step.py: {cpus} threads asked, {len(allowed)} CPUs available")
    os.sched_setaffinity(0, allowed[:cpus])


def mlp_init(key, sizes):
    """flax's Dense defaults: lecun_normal kernels (in x out), zero biases."""
    import jax
    import jax.numpy as jnp
    init = jax.nn.initializers.lecun_normal()
    params = []
    for k, (m, n) in zip(jax.random.split(key, len(sizes) - 1), zip(sizes[:-1], sizes[1:])):
        params.append({"kernel": init(k, (m, n), jnp.float32), "bias": jnp.zeros((n,), jnp.float32)})
    return params


def mlp_apply(params, x):
    import jax
    for layer in params[:-1]:
        x = jax.nn.swish(x @ layer["kernel"] + layer["bias"])
    return x @ params[-1]["kernel"] + params[-1]["bias"]


def make_step(tx):
    """The jitted training step: loss, gradients, the optimizer's update, in one XLA program."""
    import jax
    import optax

    def loss_fn(params, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(mlp_apply(params, x), y).mean()

    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return jax.jit(step, donate_argnums=(0, 1))


def child(batch, threads, seconds):
    pin_to(threads)
    import time
    import jax
    import optax
    key = jax.random.key(0)
    kp, kx, ky = jax.random.split(key, 3)
    params = mlp_init(kp, SIZES)
    tx = optax.sgd(1e-3)
    opt_state = tx.init(params)
    x = jax.random.uniform(kx, (batch, SIZES[0]))
    y = jax.random.randint(ky, (batch,), 0, SIZES[-1])
    train_step = make_step(tx)
    state = [params, opt_state]

    def step():
        p, s, loss = train_step(state[0], state[1], x, y)
        loss.block_until_ready()
        state[0], state[1] = p, s

    for _ in range(10):  # compiles, then warms up
        step()
    per_round = max(1, int(0.05 / 0.002) if batch <= 256 else 5)
    print(1e3 * cp.median_seconds(step, seconds, time.perf_counter, per_round, min_rounds=5))


def jax_step_ms(batch, threads, seconds):
    env = {k: v for k, v in os.environ.items() if k not in cp.UNSET}
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    out = subprocess.run([sys.executable, __file__, "--child", str(batch), str(threads), str(seconds)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def versions():
    from importlib.metadata import version
    return {name: version(name) for name in ("jax", "jaxlib", "optax")}


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        return child(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", required=True, help="grove's bench_nn executable")
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--batches", type=int, nargs="+", default=[128, 1024])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="thread budgets")
    p.add_argument("--seconds", type=float, default=1.0, help="measuring time per setting and round")
    p.add_argument("--rounds", type=int, default=3, help="rounds alternating grove and JAX")
    args = p.parse_args()
    try:
        info = versions()
    except Exception as e:  # a missing package: say which environment this needs
        sys.exit(f"jax_step.py: {e}; run it with the oracle environment's python "
                 f"(scripts/oracle-env.sh build/oracle-venv)")
    rows = []
    for batch in args.batches:
        for threads in args.threads:
            grove, jax = [], []
            for _ in range(args.rounds):
                grove.append(cp.grove_step_ms(args.bench, batch, threads, args.seconds))
                jax.append(jax_step_ms(batch, threads, args.seconds))
            rows.append({"batch": batch, "threads": threads, "grove_ms": statistics.median(grove),
                         "jax_ms": statistics.median(jax), "rounds": args.rounds})
            print(f"  batch {batch}, {threads} thread(s): grove {rows[-1]['grove_ms']:.3f} ms, "
                  f"JAX {rows[-1]['jax_ms']:.3f} ms", flush=True)
    with open(args.out, "w") as f:
        json.dump({**info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
