#!/usr/bin/python3
"""NumPy peer of `nitrix bench bilateral`: the bilateral filter on a 64^3 grid with the 27-voxel
cube (clamped, invalid slots masked), features (x, y, z, intensity), diagonal metric
sigma = (1.5, 1.5, 1.5, 0.2), f32, vectorised NumPy (gather by fancy indexing, one weighted sum).
The inputs are built as bench/bench-bilateral.c builds them. Prints the median of the timed runs.
Run by hand:  /usr/bin/python3 bench/peers-bilateral.py [runs]
"""
import sys
import time

import numpy as np

SIDE = 64


def inputs():
    n = SIDE ** 3
    i = np.arange(n, dtype=np.int64)
    x, y, z = i // (SIDE * SIDE), i // SIDE % SIDE, i % SIDE
    v = (np.sin(0.1 * x) + np.cos(0.07 * y) + 0.3 * (i * 7919 % 101) / 101).astype(np.float32)
    f = np.stack([x, y, z, v.astype(np.float64)], 1).astype(np.float32)
    offs = np.stack(np.meshgrid(*[np.arange(-1, 2)] * 3, indexing="ij"), -1).reshape(-1, 3)
    pos = np.stack([x, y, z], 1)
    q = pos[:, None, :] + offs[None]
    valid = np.all((q >= 0) & (q < SIDE), -1)
    q = np.clip(q, 0, SIDE - 1)
    idx = (q[..., 0] * SIDE + q[..., 1]) * SIDE + q[..., 2]
    sigma = np.array([1.5, 1.5, 1.5, 0.2], np.float32)
    return v[:, None], f, sigma, idx, valid


def bilateral(v, f, sigma, idx, valid):
    d = (f[:, None, :] - f[idx]) / sigma
    w = np.exp(np.float32(-0.5) * np.einsum("nkd,nkd->nk", d, d)) * valid
    return np.einsum("nk,nkc->nc", w, v[idx]) / w.sum(1, keepdims=True)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    args = inputs()
    bilateral(*args)
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        bilateral(*args)
        t.append(time.perf_counter() - t0)
    t.sort()
    print(f"peer numpy {np.__version__} bilateral_gaussian_64c_27 f32: "
          f"median {t[len(t) // 2]:.4f} s (min {t[0]:.4f}, max {t[-1]:.4f}, {runs} runs)")


if __name__ == "__main__":
    main()
