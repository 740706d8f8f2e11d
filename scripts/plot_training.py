#!/usr/bin/env python3
"""Draws train_mlp's training curves from its --metrics CSV: train and test loss, and test
accuracy, per epoch, as one PNG (two panels).

    /usr/bin/python3 scripts/plot_training.py --metrics run.csv --out run.png [--title TEXT]
    /usr/bin/python3 scripts/plot_training.py --check     # exit 0 when matplotlib is there

train_mlp --plot FILE.png runs this after training (and with --check before it). The CSV is the
one train_mlp writes: a header `epoch,train_loss,test_loss,test_accuracy,epoch_seconds` and one
row per epoch (accuracy as a fraction). The PNG is written atomically, only over a regular file
(scripts/plot_common.py). Needs Debian's python3-matplotlib; exit status 2 for a usage error
(including an output path that cannot be written), 1 for a failure (matplotlib missing, a CSV
that is not train_mlp's).
"""
import argparse
import csv
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_common import Failure, UsageError, output_problem, pyplot, run, save_png  # noqa: E402

PROGRAM = "plot_training.py"
COLUMNS = ["epoch", "train_loss", "test_loss", "test_accuracy"]


def read_metrics(path):
    """The CSV's rows as dicts of floats; Failure when it is not train_mlp's metrics."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise Failure(f"{PROGRAM}: {path}: not train_mlp's metrics (no column "
                              f"{', '.join(missing)}; header: {','.join(header) or 'none'})")
            rows = []
            for line, row in enumerate(reader, start=2):
                try:
                    values = {c: float(row[c]) for c in COLUMNS}
                except (TypeError, ValueError):
                    raise Failure(f"{PROGRAM}: {path}:{line}: not a number in {row}") from None
                if not all(math.isfinite(v) for v in values.values()):
                    raise Failure(f"{PROGRAM}: {path}:{line}: a value is not finite: {row}")
                rows.append(values)
    except FileNotFoundError:
        raise Failure(f"{PROGRAM}: {path}: no such file") from None
    except UnicodeDecodeError:
        raise Failure(f"{PROGRAM}: {path}: not a text file") from None
    if not rows:
        raise Failure(f"{PROGRAM}: {path}: no epochs to plot")
    return rows


def draw(rows, title):
    plt = pyplot(PROGRAM)
    epochs = [r["epoch"] for r in rows]
    fig, (loss, acc) = plt.subplots(1, 2, figsize=(8, 3.2), dpi=100, layout="constrained")
    loss.plot(epochs, [r["train_loss"] for r in rows], marker="o", markersize=3, label="train")
    loss.plot(epochs, [r["test_loss"] for r in rows], marker="o", markersize=3, label="test")
    loss.set_xlabel("epoch")
    loss.set_ylabel("cross-entropy loss")
    loss.legend()
    loss.grid(alpha=0.3)
    acc.plot(epochs, [100 * r["test_accuracy"] for r in rows], marker="o", markersize=3,
             color="tab:green")
    acc.set_xlabel("epoch")
    acc.set_ylabel("test accuracy (%)")
    acc.grid(alpha=0.3)
    for ax in (loss, acc):
        ax.xaxis.get_major_locator().set_params(integer=True)
    if title:
        fig.suptitle(title)
    return fig


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--metrics", help="train_mlp's --metrics CSV")
    p.add_argument("--out", help="the PNG to write")
    p.add_argument("--title", default="", help="a title over both panels")
    p.add_argument("--check", action="store_true",
                   help="only check that matplotlib can be imported (and --out, if given)")
    args = p.parse_args()
    if args.out is not None and output_problem(args.out):
        raise UsageError(f"{PROGRAM}: {output_problem(args.out)}")
    if args.check:
        pyplot(PROGRAM)
        return
    if not args.metrics or not args.out:
        raise UsageError(f"{PROGRAM}: --metrics and --out are required (or --check)")
    fig = draw(read_metrics(args.metrics), args.title)
    save_png(fig, args.out, PROGRAM)


if __name__ == "__main__":
    run(PROGRAM, main)
