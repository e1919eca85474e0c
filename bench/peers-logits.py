#!/usr/bin/python3
"""NumPy/SciPy peers of the logits rows of `nitrix bench` (bench/bench-logits.c): the same shapes
and dtypes (f32), inputs drawn the same way (uniform; the bench's own generator, not bit-equal),
each the median of runs after a warm-up, single-threaded NumPy as installed. Prints JSON lines
with the fields of `nitrix bench --json` (backend "numpy"). Run by hand in the same session with a
Python that has NumPy and SciPy (a venv V with numpy 1.24 and scipy 1.10):

    python3 bench/peers-logits.py [--runs N]

The peers compute the same unreduced values with the same stable forms:
  bce_with_logits:            maximum(x, 0) - x t + log1p(exp(-|x|))
  cross_entropy_with_logits:  scipy.special.logsumexp(x, axis=1) - take_along_axis(x, target)
  info_nce:                   rows normalised, L = a b^T / 0.1, the two directions' logsumexp
"""
import argparse
import json
import time

import numpy as np
from scipy.special import logsumexp


def median_spread(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(min(times)), float(max(times))


def bce(x, t):
    return np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))


def ce(x, target):
    pick = np.take_along_axis(x, target[:, None], axis=1)[:, 0]
    return logsumexp(x, axis=1) - pick


def info_nce(za, zb, temperature):
    a = za / np.maximum(np.linalg.norm(za, axis=1, keepdims=True), 1e-12)
    b = zb / np.maximum(np.linalg.norm(zb, axis=1, keepdims=True), 1e-12)
    lg = (a @ b.T) / np.float32(temperature)
    d = np.diagonal(lg)
    return 0.5 * (logsumexp(lg, axis=1) + logsumexp(lg, axis=0)) - d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(20261207)
    f32 = np.float32
    x = rng.uniform(-10, 10, (256, 256, 256)).astype(f32)
    t = rng.uniform(0, 1, (256, 256, 256)).astype(f32)
    lg = rng.uniform(-10, 10, (4, 8, 64, 64, 64)).astype(f32)
    tg = rng.integers(0, 8, (4, 64, 64, 64))
    za = rng.uniform(-1, 1, (4096, 128)).astype(f32)
    zb = rng.uniform(-1, 1, (4096, 128)).astype(f32)
    rows = [("bce_with_logits_256", "[256,256,256]", lambda: bce(x, t)),
            ("cross_entropy_with_logits_4x8x64", "[4,8,64,64,64]", lambda: ce(lg, tg)),
            ("info_nce_4096x128", "[4096,128]", lambda: info_nce(za, zb, 0.1))]
    print(json.dumps({"numpy": np.__version__}), flush=True)
    for name, shape, fn in rows:
        med, lo, hi = median_spread(fn, args.runs)
        print(json.dumps({"name": name, "backend": "numpy", "dtype": "f32", "shape": shape,
                          "median_s": med, "runs": args.runs, "min_s": lo, "max_s": hi}),
              flush=True)


if __name__ == "__main__":
    main()
