"""What the oracle scripts share: running a C++ driver and reading its records
(tests/oracle/oracle_io.hpp), writing records for a driver to read, distances in ulps, and a
verdict that prints each check and exits 1 if any failed. No check here can skip: a script that
cannot run its oracle fails."""
import subprocess
import sys

import numpy as np

_TEXT = "text"


def parse_records(data: bytes) -> dict:
    """Records (name -> numpy array, or str for text) from a driver's output."""
    out = {}
    pos = 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        fields = data[pos:end].decode().split()
        if not fields or fields[0] != "grove-record":
            raise ValueError(f"not a record header at byte {pos}: {data[pos:end][:80]!r}")
        name, dtype, ndim = fields[1], fields[2], int(fields[3])
        shape = tuple(int(d) for d in fields[4:4 + ndim])
        nbytes = int(fields[4 + ndim])
        payload = data[end + 1:end + 1 + nbytes]
        if len(payload) != nbytes:
            raise ValueError(f"record {name}: {len(payload)} bytes of {nbytes}")
        if dtype == _TEXT:
            out[name] = payload.decode()
        else:
            out[name] = np.frombuffer(payload, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
        pos = end + 1 + nbytes
    return out


def run_driver(driver, *args, input_file=None) -> dict:
    """Runs DRIVER ARGS... and returns its records; a driver that fails fails the check."""
    cmd = [str(driver)] + [str(a) for a in args]
    if input_file is not None:
        cmd.append(str(input_file))
    proc = subprocess.run(cmd, capture_output=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr.decode(errors="replace"))
        raise SystemExit(f"the driver failed (exit {proc.returncode}): {' '.join(cmd)}")
    return parse_records(proc.stdout)


def write_records(path, records: dict):
    """Writes name -> numpy array (or str) records for a driver's oracle::read_records."""
    with open(path, "wb") as f:
        for name, value in records.items():
            if isinstance(value, str):
                raw = value.encode()
                f.write(f"grove-record {name} {_TEXT} 0 {len(raw)}\n".encode())
                f.write(raw)
                continue
            a = np.asarray(value)
            a = np.ascontiguousarray(a) if a.ndim else a
            code = {np.dtype(np.float32): "f4", np.dtype(np.float64): "f8",
                    np.dtype(np.int32): "i4", np.dtype(np.int64): "i8",
                    np.dtype(np.uint32): "u4", np.dtype(np.uint64): "u8",
                    np.dtype(np.uint8): "u1", np.dtype(np.uint16): "u2", np.dtype(np.int16): "i2", np.dtype(np.bool_): "b1"}[a.dtype]
            shape = " ".join(str(d) for d in a.shape)
            f.write(f"grove-record {name} {code} {a.ndim}{' ' if a.ndim else ''}{shape} "
                    f"{a.nbytes}\n".encode())
            f.write(a.astype(a.dtype.newbyteorder("<")).tobytes())


def ulp_distance(a, b) -> np.ndarray:
    """Elementwise distance in units in the last place between two float arrays of one dtype,
    exact in integers (0 where both are NaN, the largest int64 where only one is)."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.dtype != b.dtype or a.dtype.kind != "f":
        raise TypeError(f"ulp_distance of {a.dtype} and {b.dtype}")
    width = a.dtype.itemsize
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[width]
    magnitude_mask = np.int64((1 << (8 * width - 1)) - 1)

    def ordered(x):  # the floats' order as integers: -0 and +0 both 0
        i = x.view(bits).astype(np.int64)
        magnitude = i & magnitude_mask
        return np.where(i < 0, -magnitude, magnitude)

    oa, ob = ordered(a), ordered(b)
    # |oa - ob| < 2**64: the wrapped unsigned difference on the right side is exact.
    d = np.where(oa >= ob, oa.astype(np.uint64) - ob.astype(np.uint64),
                 ob.astype(np.uint64) - oa.astype(np.uint64))
    d = np.minimum(d, np.uint64(np.iinfo(np.int64).max)).astype(np.int64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    d = np.where(nan_a & nan_b, 0, d)
    return np.where(nan_a ^ nan_b, np.iinfo(np.int64).max, d)


class Verdict:
    """Collects checks; `finish()` prints the count and exits 1 if any failed."""

    def __init__(self, what: str):
        self.what = what
        self.checks = 0
        self.failures = 0

    def expect(self, ok: bool, message: str):
        self.checks += 1
        if not ok:
            self.failures += 1
            print(f"FAILED: {message}")
        return ok

    def note(self, message: str):
        print(message)

    def same_bits(self, name: str, ours, theirs):
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        if not self.expect(ours.shape == theirs.shape and ours.dtype == theirs.dtype,
                           f"{name}: grove gave {ours.dtype}{ours.shape}, the oracle {theirs.dtype}{theirs.shape}"):
            return False
        # A 0-d or non-contiguous array has no byte view of its own.
        ours = np.ascontiguousarray(np.atleast_1d(ours))
        theirs = np.ascontiguousarray(np.atleast_1d(theirs))
        differ = ours.view(np.uint8).reshape(ours.size, -1) != theirs.view(np.uint8).reshape(theirs.size, -1) \
            if ours.size else np.zeros((0, 1), bool)
        bad = np.flatnonzero(differ.any(axis=1))
        ok = self.expect(bad.size == 0, f"{name}: {bad.size} of {ours.size} values differ in their bits; "
                                        f"first at flat index {bad[:5].tolist()}: grove "
                                        f"{ours.ravel()[bad[:5]].tolist()}, oracle {theirs.ravel()[bad[:5]].tolist()}"
                         if bad.size else "")
        if ok:
            print(f"{name}: {ours.size} values, bit for bit")
        return ok

    def max_ulps(self, name: str, ours, theirs, limit: int):
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        if not self.expect(ours.shape == theirs.shape, f"{name}: shapes {ours.shape} and {theirs.shape}"):
            return None
        d = ulp_distance(ours, theirs)
        worst = int(d.max()) if d.size else 0
        where = int(d.argmax()) if d.size else 0
        ok = self.expect(worst <= limit, f"{name}: {worst} ulps apart at flat index {where} (limit {limit}): "
                                         f"grove {ours.ravel()[where]!r}, oracle {theirs.ravel()[where]!r}")
        if ok:
            print(f"{name}: {ours.size} values, at most {worst} ulp apart "
                  f"({np.count_nonzero(d)} not bit for bit; limit {limit})")
        return worst

    def close(self, name: str, ours, theirs, rtol: float, atol: float = 0.0):
        """|ours - theirs| <= atol + rtol * |theirs| everywhere, and NaN exactly where the oracle
        has NaN."""
        ours = np.asarray(ours, dtype=np.float64)
        theirs = np.asarray(theirs, dtype=np.float64)
        if not self.expect(ours.shape == theirs.shape, f"{name}: shapes {ours.shape} and {theirs.shape}"):
            return False
        nan_ours, nan_theirs = np.isnan(ours), np.isnan(theirs)
        if not self.expect(np.array_equal(nan_ours, nan_theirs),
                           f"{name}: NaN at {np.flatnonzero(nan_ours != nan_theirs)[:5].tolist()} "
                           f"in one and not the other"):
            return False
        finite = ~nan_theirs
        diff = np.where(finite, np.abs(ours - theirs), 0.0)
        excess = diff - (atol + rtol * np.abs(np.where(finite, theirs, 0.0)))
        worst = int(excess.argmax()) if excess.size else 0
        rel = float((diff / np.maximum(np.abs(np.where(finite, theirs, 1.0)), 1e-300)).max()) \
            if diff.size else 0.0
        ok = self.expect(excess.size == 0 or excess.max() <= 0,
                         f"{name}: grove {ours.ravel()[worst]!r}, oracle {theirs.ravel()[worst]!r} at flat "
                         f"index {worst} (rtol {rtol}, atol {atol})")
        if ok:
            print(f"{name}: {ours.size} values within rtol {rtol}, atol {atol} "
                  f"(largest relative difference {rel:.3g})")
        return ok

    def finish(self):
        if self.failures:
            print(f"{self.what}: {self.failures} of {self.checks} checks FAILED")
            sys.exit(1)
        if self.checks == 0:
            print(f"{self.what}: no check ran")
            sys.exit(1)
        print(f"{self.what}: all {self.checks} checks passed")
        sys.exit(0)
