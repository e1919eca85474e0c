#!/usr/bin/python3
"""NumPy peers of `nitrix bench` rows b and c (issue 5): max-plus and log-sum-exp contractions of
two 1024x1024 f32 matrices by blocked broadcasting, the median of runs after a warm-up. Prints
JSON lines with the fields of `nitrix bench --json` (backend "numpy").

    /usr/bin/python3 bench/peers.py [--runs N] [--n 1024] [--block 64]
"""
import argparse
import json
import time

import numpy as np
import scipy
from scipy.special import logsumexp


def maxplus(a, b, block):
    """C = max_k A[:, k, None] + B[k], accumulated over blocks of k in place (NumPy's fastest
    form here: the max over a middle axis of a blocked broadcast is about 9x slower)."""
    n = a.shape[0]
    c = np.full((n, b.shape[1]), -np.inf, dtype=a.dtype)
    for k0 in range(0, a.shape[1], block):
        t = a[:, k0:k0 + block, None] + b[None, k0:k0 + block, :]
        np.maximum(c, t.max(axis=1), out=c)
    return c


def lse(a, b, block):
    n = a.shape[0]
    c = np.empty((n, b.shape[1]), dtype=a.dtype)
    for i in range(0, n, block):
        c[i:i + block] = logsumexp(a[i:i + block, :, None] + b[None, :, :], axis=1)
    return c


def median_time(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--rows", default="", help="comma-separated name prefixes, e.g. b,c")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = args.n
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    ap_only = [r for r in args.rows.split(",") if r]
    for name, fn in (("b_maxplus_contraction", maxplus), ("c_lse_contraction", lse)):
        if ap_only and not any(name.startswith(r) for r in ap_only):
            continue
        t = median_time(lambda: fn(a, b, args.block), args.runs)
        print(json.dumps({
            "name": name, "backend": "numpy", "dtype": "f32", "shape": f"[{n},{n},{n}]",
            "median_s": t, "runs": args.runs, "peer": "", "peer_median_s": 0, "floor_s": 0,
            "note": f"numpy {np.__version__}, scipy {scipy.__version__}, block {args.block}",
        }), flush=True)


if __name__ == "__main__":
    main()
