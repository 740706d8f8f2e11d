"""A PyTorch model with LayerNorms in grove: the state_dict of
nn.Sequential(Linear(6, 16), LayerNorm(16), ReLU(), Linear(16, 8), LayerNorm(8), Linear(8, 4)),
every parameter randomised (PyTorch starts a LayerNorm at ones and zeros, so a weight and a bias
could be confused unnoticed), written as a safetensors file with json and numpy, loads into
grove's nn::sequential with io::torch_sequential_names(params) (tests/checkpoint_torch_layernorm.cpp):
each parameter bit for bit under grove's name ("1.weight" is "1/scale", "3.weight" "3/w"), and
nn::apply's output for a batch close to the module's own forward, in float32.

Usage: checkpoint_torch_layernorm.py DRIVER WORK_DIR. Needs PyTorch (Debian's python3-torch, in
scripts/packages.txt): without it the test fails rather than skip.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

try:
    import torch
except ImportError:
    print("checkpoint_torch_layernorm.py: PyTorch is not installed for this python "
          f"({sys.executable}; Debian: apt-get install python3-torch)")
    sys.exit(1)

DTYPES = {"F32": "<f4"}


def write(path, arrays):
    """A safetensors file of float32 arrays, in the given order."""
    header, blobs, offset = {}, [], 0
    for name, a in arrays.items():
        blob = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read(path):
    """{name: array} of a safetensors file of F32 tensors."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + begin:8 + n + end], DTYPES[t["dtype"]]).reshape(t["shape"])
    return out


def main():
    if len(sys.argv) != 3:
        print("usage: checkpoint_torch_layernorm.py DRIVER WORK_DIR", file=sys.stderr)
        return 2
    driver, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    nn = torch.nn
    net = nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 8),
                        nn.LayerNorm(8), nn.Linear(8, 4))
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.5 * torch.randn_like(p))
    state = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    x = torch.randn(32, 6)
    with torch.no_grad():
        y = net(x).numpy()
    model_file, input_file = os.path.join(work, "torch.safetensors"), os.path.join(work, "x.safetensors")
    write(model_file, state)
    write(input_file, {"x": x.numpy()})
    run = subprocess.run([driver, model_file, input_file, work], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"the driver failed (exit {run.returncode}):\n{run.stderr}")
        return 1

    failures = 0
    params = read(os.path.join(work, "params.safetensors"))
    # torch's names -> grove's: layers 1 and 4 are the LayerNorms, whose weight is grove's scale.
    norms = {"1", "4"}
    fields = {"weight": ("scale", "w"), "bias": ("bias", "b")}
    wanted = {}
    for name, a in state.items():
        layer, field = name.split(".")
        wanted[f"{layer}/{fields[field][0 if layer in norms else 1]}"] = (name, a)
    if sorted(params) != sorted(wanted):
        print(f"grove saved the leaves {sorted(params)}, expected {sorted(wanted)}")
        failures += 1
    for ours_name, (torch_name, a) in wanted.items():
        if ours_name in params and not np.array_equal(params[ours_name].view(np.uint32), a.view(np.uint32)):
            print(f"{torch_name} -> {ours_name}: grove's values differ from torch's")
            failures += 1
    print(f"{len(wanted)} parameters: grove's leaves hold torch's state_dict bit for bit"
          if failures == 0 else "parameters: FAILED")

    ours = read(os.path.join(work, "y.safetensors"))["y"].astype(np.float64)
    diff = np.abs(ours - y)
    # Linear layers agree to rounding; the LayerNorms' mean and variance are summed in other orders.
    bound = 4e-6 + 1e-5 * np.abs(y)
    if ours.shape != y.shape or not (diff <= bound).all():
        worst = np.unravel_index(np.argmax(diff - bound), diff.shape) if ours.shape == y.shape else None
        print(f"grove's nn::apply differs from torch's forward beyond 4e-6 + 1e-5 |y|: at {worst}, "
              f"grove {ours[worst] if worst else ours.shape}, torch {y[worst] if worst else y.shape}")
        failures += 1
    else:
        print(f"{y.size} outputs within 4e-6 + 1e-5 |y| of torch {torch.__version__}'s forward: "
              f"largest |grove - torch| {diff.max():.3g} (outputs up to {np.abs(y).max():.3g})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
