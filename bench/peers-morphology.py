#!/usr/bin/python3
"""scipy.ndimage peers of the morphology rows of `nitrix bench` (bench/bench-morphology.c): the
same shapes and densities, the median of runs after a warm-up. Prints JSON lines with the fields
of `nitrix bench --json` (backend "scipy"). Run by hand in the same session as the bench:

    /usr/bin/python3 bench/peers-morphology.py [--runs N] [--rows morph_edt,morph_label]
"""
import argparse
import json
import time

import numpy as np
import scipy
import scipy.ndimage as ndi


def median_spread(fn, runs):
    """Wall-clock median, min and max, and the median CPU time of the process (on a loaded
    machine the wall clock includes waiting for a core)."""
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
    ap.add_argument("--rows", default="", help="comma-separated name substrings")
    args = ap.parse_args()
    rng = np.random.default_rng(20261129)
    u256 = rng.random((256, 256, 256), dtype=np.float32)
    u128 = rng.random((128, 128, 128), dtype=np.float32)
    m256 = (rng.random((256, 256, 256)) < 0.99).astype(np.float32)
    m128 = (rng.random((128, 128, 128)) < 0.5).astype(np.float32)
    rows = [
        ("morph_dilate_3x3x3", "[256,256,256]", lambda: ndi.grey_dilation(u256, size=(3, 3, 3))),
        ("morph_edt", "[256,256,256]", lambda: ndi.distance_transform_edt(m256)),
        ("morph_median_3x3x3", "[128,128,128]", lambda: ndi.median_filter(u128, size=3)),
        ("morph_label", "[128,128,128]", lambda: ndi.label(m128)),
    ]
    want = [r for r in args.rows.split(",") if r]
    for name, shape, fn in rows:
        if want and not any(w in name for w in want):
            continue
        med, lo, hi, cpu = median_spread(fn, args.runs)
        print(json.dumps({"name": name, "backend": "scipy", "dtype": "f32", "shape": shape,
                          "median_s": med, "min_s": lo, "max_s": hi, "cpu_s": cpu,
                          "runs": args.runs,
                          "peer": f"scipy {scipy.__version__}, numpy {np.__version__}"}))


if __name__ == "__main__":
    main()
