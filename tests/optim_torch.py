"""grove::optim against torch.optim: runs tests/optim_torch_driver.cpp (grove's trajectories) and
torch.optim's AdamW, RMSprop (not centered), Adagrad and SGD (momentum, nesterov) on the same
start and gradients, in double, and compares every parameter after every step to 1e-12.

Usage: optim_torch.py DRIVER. Exits 77 (ctest's SKIP_RETURN_CODE) when PyTorch is missing.
"""
import subprocess
import sys

N, STEPS = 7, 6

try:
    import torch
except ImportError:
    print("optim_torch.py: PyTorch is not installed (Debian: apt-get install python3-torch); skipped")
    sys.exit(77)


def start():
    return torch.tensor([0.3 * (i - 3) + 0.05 * i * i for i in range(N)], dtype=torch.float64)


def grad(p):
    a = torch.tensor([0.5 + 0.25 * i for i in range(N)], dtype=torch.float64)
    c = torch.tensor([0.1 * (i % 3 - 1) for i in range(N)], dtype=torch.float64)
    return a * p + c


def trajectory(make):
    p = start().clone().requires_grad_(False)
    p = torch.nn.Parameter(p)
    opt = make([p])
    out = []
    for _ in range(STEPS):
        opt.zero_grad()
        p.grad = grad(p.detach())
        opt.step()
        out.append(p.detach().clone())
    return out


OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=0.01, alpha=0.9, eps=0.0),
    "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=0.1, initial_accumulator_value=0.1, eps=0.0),
    "sgd_nesterov": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.8),
}


def main():
    if len(sys.argv) != 2:
        print("usage: optim_torch.py DRIVER", file=sys.stderr)
        return 2
    lines = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout.splitlines()
    grove = {}
    i = 0
    while i < len(lines):
        name = lines[i]
        grove[name] = [torch.tensor([float(x) for x in line.split()], dtype=torch.float64)
                       for line in lines[i + 1:i + 1 + STEPS]]
        i += 1 + STEPS
    if set(grove) != set(OPTIMIZERS):
        print(f"optim_torch.py: the driver printed {sorted(grove)}, expected {sorted(OPTIMIZERS)}")
        return 1
    failures = 0
    for name, make in OPTIMIZERS.items():
        before = failures
        theirs = trajectory(make)
        for step, (ours, ref) in enumerate(zip(grove[name], theirs)):
            err = ((ours - ref).abs() / ref.abs().clamp(min=1.0)).max().item()
            moved = (ref - start()).abs().max().item()
            ok = err <= 1e-12 and moved > 1e-4
            if not ok:
                failures += 1
                print(f"{name} step {step + 1}: relative difference {err:.3g} (moved {moved:.3g})")
                print(f"  grove: {ours.tolist()}\n  torch: {ref.tolist()}")
        if failures == before:
            print(f"{name}: {STEPS} steps agree with torch.optim {torch.__version__} to 1e-12")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
