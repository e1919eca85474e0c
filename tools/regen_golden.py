#!/usr/bin/python3
"""Regenerates the golden corpus (golden/<family>/<case>/) from independent libraries only
(NumPy in float64, scipy), never from nitrix. docs/fidelity.md describes the format:

  golden/<family>/<case>/manifest.txt   key = value lines: op, dtype, inputs (the .npy files in
                                        the entry point's argument order), output, options
                                        (`name=value` pairs as `nitrix run` spells them),
                                        generator, numpy, scipy, seed
  golden/<family>/<case>/*.npy          inputs and the reference output (float64 math, stored in
                                        the case's dtype)

The Python environment is pinned: the tool refuses other numpy/scipy versions than PINNED, so a
regenerated corpus differs from the committed one only when the math does. Run it as
    tools/regen_golden.py            (rewrites every family)
    tools/regen_golden.py semiring   (one family)
"""
import os
import shutil
import sys

import numpy as np
import scipy
import scipy.signal
import scipy.special

PINNED = {"numpy": "1.24", "scipy": "1.10"}
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden")
SEED = 20261129


def check_pins():
    have = {"numpy": np.__version__, "scipy": scipy.__version__}
    for name, want in PINNED.items():
        if not (have[name] == want or have[name].startswith(want + ".")):
            sys.exit(f"regen_golden.py: {name} {have[name]} found, {want}.x pinned "
                     f"(use /usr/bin/python3, or update PINNED with a CHANGELOG.md entry)")
    return have


def write_case(family, name, op, dtype, inputs, out, options, generator, versions, extra=()):
    d = os.path.join(ROOT, family, name)
    os.makedirs(d, exist_ok=True)
    files = []
    for key, arr in inputs:
        fn = f"{key}.npy"
        np.save(os.path.join(d, fn), np.ascontiguousarray(arr.astype(dtype)))
        files.append(fn)
    np.save(os.path.join(d, "out.npy"), np.ascontiguousarray(out.astype(dtype)))
    lines = [f"op = {op}", f"dtype = {np.dtype(dtype).name}", f"inputs = {' '.join(files)}",
             "output = out.npy", f"options = {' '.join(f'{k}={v}' for k, v in options)}",
             f"generator = {generator}", f"numpy = {versions['numpy']}",
             f"scipy = {versions['scipy']}", f"seed = {SEED}"] + list(extra)
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ---- semiring: matmul under the six built-in algebras, conv under REAL -------------------------

def sr_times(sr, a, b):
    if sr == "real":
        return a * b
    if sr == "boolean":
        return ((a != 0) & (b != 0)).astype(np.float64)
    if sr == "euclidean":
        return (a - b) ** 2
    return a + b


def sr_plus(sr, t, axis):
    if sr == "real":
        return t.sum(axis=axis)
    if sr == "euclidean":
        return np.sqrt(t.sum(axis=axis))
    if sr == "log":
        return scipy.special.logsumexp(t, axis=axis)
    if sr in ("tropical_max_plus", "boolean"):
        return t.max(axis=axis)
    return t.min(axis=axis)


def semiring(versions):
    rng = np.random.default_rng(SEED)
    algebras = ["real", "log", "tropical_max_plus", "tropical_min_plus", "boolean", "euclidean"]
    gen = "numpy float64 brute force (broadcast product, reduce over k); scipy.special.logsumexp"
    for dtype in ("float64", "float32"):
        for sr in algebras:
            # a batch of 2 against an unbatched b: leading dims broadcast
            shape_a, shape_b = (2, 5, 7), (7, 4)
            if sr == "boolean":
                a = (rng.random(shape_a) < 0.4).astype(np.float64)
                b = (rng.random(shape_b) < 0.4).astype(np.float64)
            else:
                a, b = rng.standard_normal(shape_a), rng.standard_normal(shape_b)
            # the operands as stored: f32 cases compute on the rounded values
            a, b = a.astype(dtype).astype(np.float64), b.astype(dtype).astype(np.float64)
            out = sr_plus(sr, sr_times(sr, a[..., :, :, None], b[None, None, :, :]), -2)
            write_case("semiring", f"matmul_{sr}_{dtype[5:] and 'f' + dtype[5:]}",
                       "semiring_matmul", dtype, [("a", a), ("b", b)], out,
                       [("semiring", sr.upper())], gen, versions,
                       ["fd = BOOLEAN is forward-only (truth values have no derivative)"]
                       if sr == "boolean" else [])
        # REAL conv, 2 spatial dims, VALID: scipy.signal.correlate per (ci, co) pair
        x = rng.standard_normal((9, 8, 2)).astype(dtype).astype(np.float64)
        k = rng.standard_normal((3, 2, 2, 3)).astype(dtype).astype(np.float64)
        out = np.stack([sum(scipy.signal.correlate(x[:, :, ci], k[:, :, ci, co], mode="valid")
                            for ci in range(2)) for co in range(3)], axis=-1)
        write_case("semiring", f"conv_real_valid_{'f' + dtype[5:]}", "semiring_conv", dtype,
                   [("x", x), ("k", k)], out, [("semiring", "REAL"), ("padding", "VALID")],
                   "scipy.signal.correlate (valid) summed over input channels", versions)
    pairwise(versions)


def pairwise(versions):
    """pairwise_reduce over points x [M, D], y [N, D] with the table's kernels, from its own seed
    (the cases above stay as they were): the Gaussian kernel summed, -|x-y|^2/eps by logsumexp,
    and (float32) the Gaussian's max. Outputs [M, 1]: one value of F per pair."""
    rng = np.random.default_rng(SEED + 73)
    for dtype in ("float64", "float32"):
        tag = "f" + dtype[5:]
        x = rng.standard_normal((6, 3)).astype(dtype).astype(np.float64)
        y = rng.standard_normal((8, 3)).astype(dtype).astype(np.float64)
        d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
        eps = 0.75
        write_case("semiring", f"pairwise_gaussian_sum_{tag}", "pairwise_reduce", dtype,
                   [("x", x), ("y", y)], np.exp(-d2 / eps).sum(1)[:, None],
                   [("reduction", "sum"), ("kernel", "gaussian"), ("eps", eps)],
                   "numpy float64: sum_j exp(-|x_i - y_j|^2 / eps) over every pair", versions)
        write_case("semiring", f"pairwise_lse_{tag}", "pairwise_reduce", dtype,
                   [("x", x), ("y", y)],
                   scipy.special.logsumexp(-d2 / eps, axis=1)[:, None],
                   [("reduction", "logsumexp"), ("kernel", "neg_sqdist"), ("eps", eps)],
                   "scipy.special.logsumexp over j of -|x_i - y_j|^2 / eps", versions)
        if dtype == "float32":
            write_case("semiring", f"pairwise_max_{tag}", "pairwise_reduce", dtype,
                       [("x", x), ("y", y)], np.exp(-d2 / eps).max(1)[:, None],
                       [("reduction", "max"), ("kernel", "gaussian"), ("eps", eps)],
                       "numpy float64: max_j exp(-|x_i - y_j|^2 / eps)", versions)


FAMILIES = {"semiring": semiring}


def main(argv):
    versions = check_pins()
    names = argv[1:] or sorted(FAMILIES)
    for name in names:
        if name not in FAMILIES:
            sys.exit(f"regen_golden.py: unknown family '{name}' (expected {' '.join(FAMILIES)})")
        shutil.rmtree(os.path.join(ROOT, name), ignore_errors=True)
        FAMILIES[name](versions)
        print(f"golden/{name}: {len(os.listdir(os.path.join(ROOT, name)))} cases")


if __name__ == "__main__":
    main(sys.argv)
