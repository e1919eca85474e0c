#!/usr/bin/python3
"""scipy.signal peer of the signal row of `nitrix bench` (bench/bench-signal.c):
sosfiltfilt_bp4_1024x4096, scipy.signal.sosfiltfilt of butter(4, [0.05, 0.2], 'bandpass', fs=1,
output='sos') along the last axis of 1024 x 4096 float64 standard normal samples (odd extension,
default padlen), the median of runs after a warm-up.

Prints JSON lines with the fields of `nitrix bench --json` (backend "scipy"). Run by hand in the
same session as the bench:

    V/bin/python bench/peers-signal.py [--runs N]
"""
import argparse
import json
import time

import numpy as np
import scipy
import scipy.signal as ss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    sos = ss.butter(4, [0.05, 0.2], btype="bandpass", fs=1.0, output="sos")
    x = np.random.default_rng(20261207).standard_normal((1024, 4096))
    ss.sosfiltfilt(sos, x, axis=-1)
    times, cpu = [], []
    for _ in range(args.runs):
        c0, t0 = time.process_time(), time.perf_counter()
        ss.sosfiltfilt(sos, x, axis=-1)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(json.dumps({"numpy": np.__version__, "scipy": scipy.__version__}), flush=True)
    print(json.dumps({"name": "sosfiltfilt_bp4_1024x4096", "backend": "scipy", "dtype": "f64",
                      "shape": "[1024,4096]", "median_s": float(np.median(times)),
                      "runs": args.runs, "min_s": min(times), "max_s": max(times),
                      "cpu_s": float(np.median(cpu))}), flush=True)


if __name__ == "__main__":
    main()
