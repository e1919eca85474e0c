#!/usr/bin/python3
"""Writes the .npy fixtures of the `nitrix` CLI tests (tests/cli/data/) with NumPy.

Inputs are x-*.npy; the expected result of each CLI command is want-*.npy, written here by NumPy
from NumPy's own computation (np.save of a C-order array, astype for casts), so the test compares
the CLI's output file byte for byte with what NumPy itself would have written. The NumPy version
is recorded in tests/cli/data/numpy-version.txt.

Run: /usr/bin/python3 tools/cli/gen-cli-fixtures.py   (from the repository root)
"""
import os
import sys

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "cli", "data")


def save(name, a, version=None):
    path = os.path.join(OUT, name)
    if version is None:
        np.save(path, a)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, a, version=version)


def main():
    os.makedirs(OUT, exist_ok=True)
    # Truncation toward zero, signed zeros, f16 overflow (65519 rounds to 65504, -65520 to -inf),
    # f16 ties to even (1 + 2^-11 -> 1, 1 + 3*2^-11 -> 1 + 2^-9), f16 underflow (1e-8 -> 0).
    x = np.array([[0.5, -1.25, 2.7, -2.7],
                  [100.9, -0.0, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11],
                  [1e-8, 65519.0, -65520.0, 127.5]], dtype=np.float64)
    save("x-f64.npy", x)
    save("want-f64-to-f32.npy", x.astype(np.float32))
    with np.errstate(over="ignore"):  # the overflow to -inf is the point
        save("want-f64-to-f16.npy", x.astype(np.float16))
    save("want-f64-to-i32.npy", x.astype(np.int32))
    save("want-f64-to-i64.npy", x.astype(np.int64))
    save("want-f64-to-bool.npy", x.astype(np.bool_))

    xi = np.array([-129, -1, 0, 1, 127, 255, 256, 70000], dtype=np.int32)
    save("x-i32.npy", xi)
    save("want-i32-to-f64.npy", xi.astype(np.float64))
    save("want-i32-to-f32.npy", xi.astype(np.float32))
    save("want-i32-to-i64.npy", xi.astype(np.int64))
    save("want-i32-to-bool.npy", xi.astype(np.bool_))
    save("want-i32-to-i16.npy", xi.astype(np.int16))  # integer narrowing wraps, as in numpy
    save("want-i32-to-u8.npy", xi.astype(np.uint8))

    xu = np.arange(8, dtype=np.uint8).reshape(2, 2, 2) * 30
    save("x-u8.npy", xu)
    save("want-u8-to-f32.npy", xu.astype(np.float32))

    xb = np.array([True, False, True], dtype=np.bool_)
    save("x-bool.npy", xb)
    save("want-bool-to-i32.npy", xb.astype(np.int32))

    # Copies: Fortran order and a version 2.0 header come back C order, version 1.0.
    xf = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4) / 8)
    save("x-f32-fortran.npy", xf)
    save("want-f32-fortran-copy.npy", np.ascontiguousarray(xf))
    xv2 = np.linspace(-1.0, 1.0, 10).reshape(2, 5)
    save("x-f64-v2.npy", xv2, version=(2, 0))
    save("want-f64-v2-copy.npy", xv2)
    save("x-f64-0d.npy", np.array(3.5))
    save("x-i16-empty.npy", np.zeros((0, 3), dtype=np.int16))

    # Casts the library must refuse at run time (exit 1): NaN to int; a float out of an integer
    # dtype's range (x-f64.npy holds 65519 and 127.5, out of range for i8) is also refused.
    save("x-f64-nan.npy", np.array([1.0, np.nan]))
    with open(os.path.join(OUT, "bad-magic.npy"), "wb") as f:
        f.write(b"\x93NUMPX\x01\x00" + b"\x00" * 56)

    with open(os.path.join(OUT, "numpy-version.txt"), "w") as f:
        f.write("numpy %s (python %s)\n" % (np.__version__, sys.version.split()[0]))


if __name__ == "__main__":
    main()
