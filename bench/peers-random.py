#!/usr/bin/python3
"""Peers of the random row of `nitrix bench` (bench/bench-random.c): 2^26 float32 standard
normal draws with NumPy's Generator(PCG64).standard_normal(dtype=np.float32) (the ziggurat, one
thread), the median of runs after a warm-up; with --gpu, 2^28 draws with torch.randn on the CUDA
device (synchronised). Prints JSON lines with the fields of `nitrix bench --json`. Run by hand in
the same session as the bench:

    V/bin/python bench/peers-random.py [--runs N] [--gpu]
"""
import argparse
import json
import time

import numpy as np


def timed(fn, runs, sync=lambda: None):
    fn()
    sync()
    t, c = [], []
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        sync()
        t.append(time.perf_counter() - t0)
        c.append(time.process_time() - c0)
    return float(np.median(t)), min(t), max(t), float(np.median(c))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--gpu", action="store_true")
    a = ap.parse_args()
    if a.gpu:
        import torch
        n = 1 << 28
        med, lo, hi, cpu = timed(lambda: torch.randn(n, dtype=torch.float32, device="cuda"), a.runs,
                            torch.cuda.synchronize)
        backend, peer, shape = "torch", f"torch {torch.__version__}", "[2^28]"
    else:
        n = 1 << 26
        g = np.random.Generator(np.random.PCG64(20261207))
        med, lo, hi, cpu = timed(lambda: g.standard_normal(n, dtype=np.float32), a.runs)
        backend, peer, shape = "numpy", f"numpy {np.__version__}", "[2^26]"
    print(json.dumps({"name": "normal_f32", "backend": backend, "dtype": "f32", "shape": shape,
                      "median_s": med, "runs": a.runs, "min_s": lo, "max_s": hi,
                      "peer": peer, "cpu_s": cpu}))


if __name__ == "__main__":
    main()
