#!/usr/bin/python3
"""scipy.ndimage peers of the smoothing rows of `nitrix bench` (bench/bench-smoothing.c): the same
shape (256^3 f32, uniform in [0, 1)), the median of runs after a warm-up. Prints JSON lines with
the fields of `nitrix bench --json` (backend "scipy"). Run by hand in the same session as the
bench:

    /usr/bin/python3 bench/peers-smoothing.py [--runs N] [--rows smoothing_gaussian_s2]
"""
import argparse
import json
import time

import numpy as np
import scipy
import scipy.ndimage as ndi


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
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", default="", help="comma-separated name substrings")
    args = ap.parse_args()
    rng = np.random.default_rng(20261129)
    u256 = rng.random((256, 256, 256), dtype=np.float32)
    rows = [
        ("smoothing_gaussian_s2", lambda: ndi.gaussian_filter(u256, 2.0)),
        ("smoothing_gaussian_recursive_s8", lambda: ndi.gaussian_filter(u256, 8.0)),
    ]
    want = [r for r in args.rows.split(",") if r]
    for name, fn in rows:
        if want and not any(w in name for w in want):
            continue
        med, lo, hi = median_spread(fn, args.runs)
        print(json.dumps({"name": name, "backend": "scipy", "dtype": "f32",
                          "shape": "[256,256,256]", "median_s": med, "min_s": lo, "max_s": hi,
                          "runs": args.runs,
                          "peer": f"scipy {scipy.__version__}, numpy {np.__version__}"}))


if __name__ == "__main__":
    main()
