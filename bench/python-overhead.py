"""Call overhead of the Python package (issue 26): nitrix.morphology.dilate(x, size=3) on an
8^3 float32 array, cache warm, against scipy.ndimage.grey_dilation on the same array. Run beside
`nitrix bench dilate_8x8x8` (the C side: nx_op_call and the typed entry point) in one session:

    .venv/bin/python bench/python-overhead.py [--runs N]

Each run times a batch of calls; the figure is the median over runs of the time of one call."""
import argparse
import time

import numpy as np
import scipy
import scipy.ndimage as ndi

import nitrix


def per_call(fn, batch, runs):
    fn()  # warm-up: compiles and caches
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - t0) / batch)
    times.sort()
    return times[len(times) // 2], times[0], times[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--batch", type=int, default=2000)
    a = ap.parse_args()
    x = np.random.default_rng(0).random((8, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(nitrix.morphology.dilate(x, size=3),
                                  ndi.grey_dilation(x, size=3))
    rows = [
        ("nitrix.morphology.dilate(x, size=3)",
         lambda: nitrix.morphology.dilate(x, size=3)),
        ("nitrix.morphology.dilate(x) (defaults)", lambda: nitrix.morphology.dilate(x)),
        (f"scipy {scipy.__version__} grey_dilation(x, size=3)",
         lambda: ndi.grey_dilation(x, size=3)),
    ]
    print(f"nitrix {nitrix.__version__}, numpy {np.__version__}, "
          f"{nitrix.default_context().threads} threads; 8^3 float32, {a.runs} runs of "
          f"{a.batch} calls")
    for name, fn in rows:
        med, lo, hi = per_call(fn, a.batch, a.runs)
        print(f"  {name:48s} {med * 1e6:8.2f} us/call  (min {lo * 1e6:.2f}, max {hi * 1e6:.2f})")


if __name__ == "__main__":
    main()
