#!/usr/bin/python3
"""scipy.ndimage peers of the geometry rows of `nitrix bench` (bench/bench-geometry-sampling.c): the same
image distribution (uniform in [0, 1)) and the same smooth displacement formula,
u_a(x) = sum_j sin(2 pi (k_aj . x) / n + 0.7 a + 1.3 j), sampled at identity + u:

  spatial_transform_linear_256  map_coordinates(order=1, mode='grid-constant'), 256^3 float32
                                (scipy computes in float64 and writes the input's dtype);
  spatial_transform_cubic_128   map_coordinates(order=3, mode='mirror'), 128^3 float64, its
                                spline prefilter included (prefilter=True).

Prints JSON lines with the fields of `nitrix bench --json` (backend "scipy"), the median of runs
after a warm-up. Run by hand in the same session as the bench:

    V/bin/python bench/peers-geometry-sampling.py [--runs N] [--rows spatial_transform_linear_256]
"""
import argparse
import json
import time

import numpy as np
import scipy
import scipy.ndimage as ndi


def displacement(n, dtype):
    x = np.indices((n, n, n), dtype=np.float64)
    u = np.zeros((3, n, n, n))
    for a in range(3):
        for j in range(3):
            k = (a + j + 1, 2 * j + 1, 3 - j)
            arg = (k[a % 3] * x[0] + k[(a + 1) % 3] * x[1] + k[(a + 2) % 3] * x[2]) * 2 * np.pi / n
            u[a] += np.sin(arg + 0.7 * a + 1.3 * j)
    return (x + u).astype(dtype)


def median_spread(fn, runs):
    fn()
    times, cpu = [], []
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(times)), float(min(times)), float(max(times)), float(np.median(cpu))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", default="")
    args = ap.parse_args()
    rng = np.random.default_rng(20261207)
    rows = {}
    for name, n, dt, order, mode in (
            ("spatial_transform_linear_256", 256, np.float32, 1, "grid-constant"),
            ("spatial_transform_cubic_128", 128, np.float64, 3, "mirror")):
        if args.rows and not any(r in name for r in args.rows.split(",")):
            continue
        img = rng.random((n, n, n)).astype(dt)
        coords = displacement(n, dt)
        rows[name] = (n, dt, (lambda img=img, coords=coords, order=order, mode=mode:
                              ndi.map_coordinates(img, coords, order=order, mode=mode,
                                                  output=img.dtype)))
    print(json.dumps({"numpy": np.__version__, "scipy": scipy.__version__}), flush=True)
    for name, (n, dt, fn) in rows.items():
        med, lo, hi, cpu = median_spread(fn, args.runs)
        print(json.dumps({"name": name, "backend": "scipy",
                          "dtype": "f64" if dt == np.float64 else "f32",
                          "shape": f"[{n},{n},{n}]", "median_s": med, "runs": args.runs,
                          "min_s": lo, "max_s": hi, "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    main()
