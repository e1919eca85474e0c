#!/usr/bin/python3
"""Golden cases of the core family's copy and cast (golden/core/<op>/<case>/, the format of
docs/fidelity.md), computed with NumPy only, never with nitrix: copy is the array itself (a
strided view made contiguous), cast is numpy's astype on values where numpy and nitrix's rules
agree (floats in range, truncated toward zero for integers; nonzero to bool is true).

The environment is pinned (numpy 1.24; the tool refuses others) and every manifest names the
version and the seed. Run from anywhere with a Python that has numpy 1.24:
    V/bin/python tools/gen-core-golden.py
"""
import os
import shutil
import sys

import numpy as np

PINNED = {"numpy": "1.24"}
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "core")
SEED = 20261202


def check_pins():
    if not (np.__version__ == PINNED["numpy"] or np.__version__.startswith(PINNED["numpy"] + ".")):
        sys.exit(f"gen-core-golden.py: numpy {np.__version__} found, {PINNED['numpy']}.x pinned")
    return np.__version__


def write_case(op, name, dtype, x, out, options, generator, version):
    d = os.path.join(ROOT, op, name)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), np.ascontiguousarray(x))
    np.save(os.path.join(d, "out.npy"), np.ascontiguousarray(out))
    lines = [f"op = {op}", f"dtype = {np.dtype(dtype).name}", "inputs = x.npy", "output = out.npy",
             f"options = {' '.join(f'{k}={v}' for k, v in options)}", f"generator = {generator}",
             f"numpy = {version}", f"seed = {SEED}"]
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    version = check_pins()
    shutil.rmtree(ROOT, ignore_errors=True)
    rng = np.random.RandomState(SEED)
    for dt in (np.float32, np.float64):
        x = rng.standard_normal((3, 4, 5)).astype(dt)
        write_case("copy", f"copy_{np.dtype(dt).name}", dt, x, x.copy(), [],
                   "numpy.ndarray.copy", version)
    x = rng.standard_normal((6, 7)) * 1e3
    write_case("cast", "cast_f64_f32", np.float32, x, x.astype(np.float32), [("dtype", "float32")],
               "numpy astype(float32) (round to nearest even)", version)
    x32 = (rng.standard_normal((6, 7)) * 10).astype(np.float32)
    write_case("cast", "cast_f32_f64", np.float64, x32, x32.astype(np.float64),
               [("dtype", "float64")], "numpy astype(float64) (exact)", version)
    xi = rng.uniform(-1e4, 1e4, size=(5, 9))
    write_case("cast", "cast_f64_i32", np.float64, xi, xi.astype(np.int32), [("dtype", "int32")],
               "numpy astype(int32) on values in range (truncation toward zero)", version)
    xb = rng.randint(-2, 3, size=(4, 6)).astype(np.float64)
    write_case("cast", "cast_f64_bool", np.float64, xb, xb.astype(np.bool_), [("dtype", "bool")],
               "numpy astype(bool) (nonzero is true)", version)


if __name__ == "__main__":
    main()
