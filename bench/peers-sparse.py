#!/usr/bin/python3
"""NumPy peers of the sparse rows of `nitrix bench` (bench/bench-sparse.c): ELL matmul with
m = 65536, k_max = 32, 32 columns, f32, as a gather of B's rows and a reduce over the slot axis
(REAL: einsum over the gathered rows; LOG: a max-shifted logsumexp; TROPICAL: max of sums). The
median of runs after a warm-up; prints JSON lines with the fields of `nitrix bench --json`
(backend "numpy"). Run by hand in the same session as the bench:

    /usr/bin/python3 bench/peers-sparse.py [--runs N] [--rows real,log]
"""
import argparse
import json
import time

import numpy as np

M, K, C = 65536, 32, 32


def median_spread(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(min(times)), float(max(times))


def real(v, idx, b):
    return np.einsum("mk,mkc->mc", v, b[idx])


def log(v, idx, b):
    t = v[:, :, None] + b[idx]
    mx = t.max(axis=1, keepdims=True)
    return (mx + np.log(np.exp(t - mx).sum(axis=1, keepdims=True)))[:, 0, :]


def tropical(v, idx, b):
    return (v[:, :, None] + b[idx]).max(axis=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", default="", help="comma-separated name substrings")
    args = ap.parse_args()
    rng = np.random.default_rng(20261129)
    v = rng.uniform(-1, 1, size=(M, K)).astype(np.float32)
    idx = rng.integers(0, M, size=(M, K)).astype(np.int32)
    b = rng.uniform(-1, 1, size=(M, C)).astype(np.float32)
    rows = [("sparse_ell_matmul_real", real), ("sparse_ell_matmul_log", log),
            ("sparse_ell_matmul_tropical", tropical)]
    want = [r for r in args.rows.split(",") if r]
    for name, fn in rows:
        if want and not any(w in name for w in want):
            continue
        med, lo, hi = median_spread(lambda: fn(v, idx, b), args.runs)
        print(json.dumps({"name": name, "backend": "numpy", "dtype": "f32",
                          "shape": "m=65536 k=32 c=32", "median_s": med, "min_s": lo,
                          "max_s": hi, "runs": args.runs,
                          "peer": f"numpy {np.__version__}",
                          "g_events_per_s": M * K * C / med / 1e9}))


if __name__ == "__main__":
    main()
