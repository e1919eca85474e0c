#!/usr/bin/python3
"""NumPy peers of the geometry rows of `nitrix bench` (bench/bench-geometry.c): the Jacobian
determinant of a 128^3 x 3 float32 displacement (the same smooth field), the median of runs after
a warm-up:

  jacobian_det_displacement_128  numpy.gradient of each component along the three axes (its
                                 edges one-sided, nitrix's the nearest-border central
                                 difference: the same work), I added, then the determinant by
                                 the closed form (Sarrus) in float32; and, as a second line,
                                 numpy.linalg.det of the stacked [128^3, 3, 3] Jacobians.

Prints JSON lines with the fields of `nitrix bench --json` (backend "numpy"). Run by hand in the
same session as the bench:

    V/bin/python bench/peers-geometry.py [--runs N]
"""
import argparse
import json
import time

import numpy as np

N = 128


def field():
    i, j, k = np.meshgrid(*[np.arange(N, dtype=np.float64)] * 3, indexing="ij")
    u = np.stack([2.0 * np.sin(0.05 * j) + np.sin(0.07 * k), 1.5 * np.sin(0.03 * i + 0.02 * k),
                  np.sin(0.04 * i) * np.cos(0.06 * j)], -1)
    return u.astype(np.float32)


def jacobian(u):
    g = [np.gradient(u[..., c], axis=(0, 1, 2)) for c in range(3)]
    for c in range(3):
        g[c][c] = g[c][c] + np.float32(1)
    return g


def det_sarrus(u):
    a = jacobian(u)
    return (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
            - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
            + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]))


def det_linalg(u):
    a = jacobian(u)
    j = np.stack([np.stack(a[c], -1) for c in range(3)], -2)
    return np.linalg.det(j)


def timed(fn, u, runs):
    fn(u)
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(u)
        t.append(time.perf_counter() - t0)
    return float(np.median(t)), min(t), max(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    u = field()
    for name, fn in (("jacobian_det_displacement_128", det_sarrus),
                     ("jacobian_det_displacement_128_linalg_det", det_linalg)):
        med, lo, hi = timed(fn, u, args.runs)
        print(json.dumps({"name": name, "backend": "numpy", "dtype": "float32",
                          "shape": [N, N, N, 3], "median_s": med, "min_s": lo, "max_s": hi,
                          "runs": args.runs, "numpy": np.__version__}))


if __name__ == "__main__":
    main()
