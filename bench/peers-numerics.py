#!/usr/bin/python3
"""NumPy peers of the numerics rows of `nitrix bench` (bench/bench-numerics.c) on a 256^3 float32
volume uniform in [0, 1) (NumPy's generator; the bench uses a fixed LCG of the same
distribution), the median of runs after a warm-up:

  zscore_normalize_256     (x - x.mean()) / (x.std() + 1e-12), float32 throughout (NumPy's
                           pairwise float32 sums)
  percentile_rescale_256   numpy.percentile(x, [0, 99]) (method linear, by partition), then
                           clip((x - p0) / (p99 - p0 + 1e-8), 0, 1) in float32

Prints JSON lines with the fields of `nitrix bench --json` (backend "numpy"). Run by hand in the
same session as the bench:

    V/bin/python bench/peers-numerics.py [--runs N]
"""
import argparse
import json
import time

import numpy as np


def zscore(x):
    return (x - x.mean()) / (x.std() + np.float32(1e-12))


def prescale(x):
    lo, hi = np.percentile(x, [0, 99])
    lo, hi = np.float32(lo), np.float32(hi)
    return np.clip((x - lo) / (hi - lo + np.float32(1e-8)), np.float32(0), np.float32(1))


def median_spread(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(min(times)), float(max(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    x = np.random.default_rng(20261207).random((256, 256, 256), dtype=np.float32)
    for name, fn in (("zscore_normalize_256", zscore), ("percentile_rescale_256", prescale)):
        med, lo, hi = median_spread(lambda: fn(x), args.runs)
        print(json.dumps({"name": name, "backend": "numpy", "dtype": "f32",
                          "shape": "[256,256,256]", "median_s": med, "min_s": lo, "max_s": hi,
                          "runs": args.runs, "numpy": np.__version__}))


if __name__ == "__main__":
    main()
