#!/usr/bin/env python3
"""grove's main job (examples/train_mlp with its defaults) next to the same training in JAX, in
one run: what bench/main_job_torch.py does against PyTorch, with JAX as a JAX user writes it.
The [784, 512, 512, 10] swish MLP on Fashion-MNIST (flax's Dense initialisation), pixels
standardized with the training set's mean and standard deviation, batches of 128 from a fresh
jax.random.permutation every epoch (the last one takes the rest), optax.adam (lr 1e-3, b1 0.9,
b2 0.999, eps 1e-8) with optax.exponential_decay(1e-3, steps per epoch, 0.9), softmax
cross-entropy, and after every epoch the test set's loss and accuracy. The step is one jax.jit
(value_and_grad and the optax update, parameters and state donated), compiled for both batch
shapes before the first epoch, so that the epochs' times hold no compilation (train_mlp has
none). Each framework's figure is the sum of its epochs' times (training and evaluation; data
loading excluded). The two initialise and shuffle with their own random numbers, so their
accuracies agree only roughly; the work per epoch is the same. Both use all the CPUs.

    build/oracle-venv/bin/python bench/main_job_jax.py --train-mlp build/main/examples/train_mlp

Runs in the test oracles' environment (scripts/oracle-env.sh). Needs dataset-fashion-mnist.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pytorch as cp  # noqa: E402
import jax_step  # noqa: E402  (the model and the jitted step)
import main_job_torch as mjt  # noqa: E402  (the IDX reader and grove's run; no torch imported)


def child(data, epochs):
    import time
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    load = lambda name: mjt.read_idx(os.path.join(data, name))  # noqa: E731
    train_x = load("train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255
    test_x = load("t10k-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32) / 255
    mean, sd = float(train_x.mean(dtype=np.float64)), float(train_x.std(dtype=np.float64))
    train_x, test_x = (jnp.asarray((a - mean) / sd) for a in (train_x, test_x))
    train_y = jnp.asarray(load("train-labels-idx1-ubyte.gz").astype(np.int32))
    test_y = jnp.asarray(load("t10k-labels-idx1-ubyte.gz").astype(np.int32))

    n, batch = train_x.shape[0], 128
    steps = (n + batch - 1) // batch
    tx = optax.adam(optax.exponential_decay(1e-3, transition_steps=steps, decay_rate=0.9),
                    b1=0.9, b2=0.999, eps=1e-8)
    key, init_key = jax.random.split(jax.random.key(0))
    params = jax_step.mlp_init(init_key, jax_step.SIZES)
    opt_state = tx.init(params)
    train_step = jax_step.make_step(tx)

    @jax.jit
    def evaluate(params, x, y):
        logits = jax_step.mlp_apply(params, x)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss, (logits.argmax(1) == y).mean()

    @jax.jit
    def gather(xs, ys, perm, s):
        idx = jax.lax.dynamic_slice_in_dim(perm, s * batch, batch)
        return xs[idx], ys[idx]

    # Compile both batch shapes (and the evaluation) on copies, outside the timed epochs.
    for size in sorted({batch, n - (steps - 1) * batch}):
        copy = jax.tree_util.tree_map(jnp.copy, (params, opt_state))
        train_step(*copy, train_x[:size], train_y[:size])[2].block_until_ready()
    evaluate(params, test_x, test_y)[0].block_until_ready()

    seconds, accuracy = [], 0.0
    for _ in range(epochs):
        t0 = time.perf_counter()
        key, perm_key = jax.random.split(key)
        perm = jax.random.permutation(perm_key, n)
        for s in range(steps - 1):
            x, y = gather(train_x, train_y, perm, s)
            params, opt_state, loss = train_step(params, opt_state, x, y)
        idx = perm[(steps - 1) * batch:]
        params, opt_state, loss = train_step(params, opt_state, train_x[idx], train_y[idx])
        test_loss, acc = evaluate(params, test_x, test_y)
        accuracy = float(acc)
        float(test_loss)
        seconds.append(time.perf_counter() - t0)
    print(json.dumps({"seconds": sum(seconds), "accuracy": accuracy}))


def jax_run(data, epochs):
    env = {k: v for k, v in os.environ.items() if k not in cp.UNSET}
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    out = subprocess.run([sys.executable, __file__, "--child", data, str(epochs)], env=env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        return child(sys.argv[2], int(sys.argv[3]))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train-mlp", required=True, help="grove's train_mlp executable")
    p.add_argument("--data", default=mjt.DATA, help="the Fashion-MNIST directory (train_mlp's --data)")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--rounds", type=int, default=1, help="rounds alternating grove and JAX")
    p.add_argument("--out", help="JSON file to write")
    args = p.parse_args()
    grove, jax = [], []
    for _ in range(args.rounds):
        grove.append(mjt.grove_run(args.train_mlp, args.data, args.epochs))
        print(f"  grove: {grove[-1]['seconds']:.1f} s, accuracy {grove[-1]['accuracy']:.4f}", flush=True)
        jax.append(jax_run(args.data, args.epochs))
        print(f"  JAX: {jax[-1]['seconds']:.1f} s, accuracy {jax[-1]['accuracy']:.4f}", flush=True)
    grove_s = statistics.median(r["seconds"] for r in grove)
    jax_s = statistics.median(r["seconds"] for r in jax)
    print(f"{args.epochs} epochs: grove {grove_s:.1f} s, JAX {jax_s:.1f} s, grove / JAX {grove_s / jax_s:.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"epochs": args.epochs, **jax_step.versions(), "grove": grove, "jax": jax,
                       "grove_s": grove_s, "jax_s": jax_s}, f, indent=1)


if __name__ == "__main__":
    main()
