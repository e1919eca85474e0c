#!/usr/bin/python3
"""Peers of the overlap rows of `nitrix bench` (bench/bench-overlap.c), on the same inputs: SciPy's
reimplementation of MONAI's surface algorithm (binary_erosion edges, distance_transform_edt,
numpy.percentile / counts: the golden generator's, tools/golden-cases/metrics/overlap.py), scikit-learn's
roc_auc_score and NumPy's dice. The median of runs after a warm-up; JSON lines with the fields of
`nitrix bench --json`. Run by hand in the same session as the bench:

    V/bin/python bench/peers-overlap.py [--runs N] [--rows hausdorff95]
"""
import argparse
import json
import time

import numpy as np
import scipy
import sklearn
from scipy import ndimage as ndi
from sklearn.metrics import roc_auc_score

MASK = (1 << 64) - 1


def lcg(seed, n):
    """bench-overlap.c's generator: s = s * 6364136223846793005 + 1442695040888963407 (mod 2^64),
    value (s >> 11) / 2^53, n values (a Python loop: slow but exact)."""
    out = np.empty(n)
    s = seed
    for i in range(n):
        s = (s * 6364136223846793005 + 1442695040888963407) & MASK
        out[i] = (s >> 11) / 9007199254740992.0
    return out


def ball(n, r, c):
    i, j, k = np.ogrid[:n, :n, :n]
    return (i - c[0]) ** 2 + (j - c[1]) ** 2 + (k - c[2]) ** 2 <= r * r


def edges(m):
    return m & ~ndi.binary_erosion(m)


def surface_dists(p, t):
    ep, et = edges(p), edges(t)
    return (ndi.distance_transform_edt(~et)[ep], ndi.distance_transform_edt(~ep)[et])


def hd95(p, t):
    a, b = surface_dists(p, t)
    return max(np.percentile(a, 95), np.percentile(b, 95))


def nsd(p, t, tol):
    a, b = surface_dists(p, t)
    return ((a <= tol).sum() + (b <= tol).sum()) / (a.size + b.size)


def median_spread(fn, runs):
    fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), float(min(ts)), float(max(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", default="", help="comma-separated name substrings")
    args = ap.parse_args()
    want = [r for r in args.rows.split(",") if r]

    def wanted(name):
        return not want or any(w in name for w in want)

    rows = []
    if wanted("hausdorff95_128") or wanted("surface_dice_128"):
        p, t = ball(128, 40, (64, 64, 64)), ball(128, 37, (67, 62, 64))
        rows.append(("hausdorff95_128", "bool", "[128,128,128]", lambda: hd95(p, t),
                     f"scipy {scipy.__version__} MONAI algorithm"))
        rows.append(("surface_dice_128", "bool", "[128,128,128]", lambda: nsd(p, t, 2.0),
                     f"scipy {scipy.__version__} MONAI algorithm"))
    if wanted("roc_auc_1m"):
        v = lcg(20261207, 2 * 1000000)
        s, y = v[0::2], (v[1::2] < v[0::2]).astype(np.int64)
        rows.append(("roc_auc_1m", "f64", "[1000000]", lambda: roc_auc_score(y, s),
                     f"sklearn {sklearn.__version__} roc_auc_score"))
    if wanted("dice_256"):
        rng = np.random.default_rng(20261207)
        pp = rng.random((256, 256, 256), dtype=np.float32)
        tt = (rng.random((256, 256, 256)) >= 0.5).astype(np.float32)
        rows.append(("dice_256", "f32", "[256,256,256]",
                     lambda: (2 * (pp * tt).sum() + 1e-7) / (pp.sum() + tt.sum() + 1e-7),
                     f"numpy {np.__version__}"))
    for name, dt, shape, fn, peer in rows:
        if not wanted(name):
            continue
        med, lo, hi = median_spread(fn, args.runs)
        print(json.dumps({"name": name, "backend": "python", "dtype": dt, "shape": shape,
                          "median_s": med, "min_s": lo, "max_s": hi, "runs": args.runs,
                          "peer": peer, "value": float(fn())}), flush=True)


if __name__ == "__main__":
    main()
