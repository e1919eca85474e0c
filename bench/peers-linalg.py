#!/usr/bin/python3
"""NumPy peers of the linalg rows of `nitrix bench` (bench/bench-linalg.c): 10^6 SPD 6 x 6
float64 problems (a = x x^T / 6 + I, x 6 x 8 uniform in [-1, 1)) and one right-hand side each,
through numpy.linalg's batched gufuncs (LAPACK potrf / gesv per problem), the median of runs
after a warm-up:

  cholesky_6x6_1e6    numpy.linalg.cholesky(a);
  cho_solve_6x6_1e6   numpy.linalg.solve(a, b) (numpy has no batched Cholesky solve);
  solve_6x6_1e6       numpy.linalg.solve(a, b);
  chol_solve_6x6_1e6  numpy.linalg.cholesky(a), then numpy.linalg.solve(a, b).

Prints JSON lines with the fields of `nitrix bench --json` (backend "numpy"). Run by hand in the
same session as the bench:

    V/bin/python bench/peers-linalg.py [--runs N] [--rows cholesky]
"""
import argparse
import json
import time

import numpy as np

N, P = 1000000, 6


def inputs():
    rng = np.random.default_rng(20261207)
    x = rng.uniform(-1, 1, (N, P, 8))
    a = x @ np.swapaxes(x, -1, -2) / P + np.eye(P)
    b = rng.uniform(-1, 1, (N, P, 1))
    return a, b


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
    a, b = inputs()
    rows = {
        "cholesky_6x6_1e6": lambda: np.linalg.cholesky(a),
        "cho_solve_6x6_1e6": lambda: np.linalg.solve(a, b),
        "solve_6x6_1e6": lambda: np.linalg.solve(a, b),
        "chol_solve_6x6_1e6": lambda: (np.linalg.cholesky(a), np.linalg.solve(a, b)),
    }
    print(json.dumps({"numpy": np.__version__}), flush=True)
    for name, fn in rows.items():
        if args.rows and not any(r in name for r in args.rows.split(",")):
            continue
        med, lo, hi, cpu = median_spread(fn, args.runs)
        print(json.dumps({"name": name, "backend": "numpy", "dtype": "f64",
                          "shape": "[1000000,6,6]", "median_s": med, "runs": args.runs,
                          "min_s": lo, "max_s": hi, "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    main()
