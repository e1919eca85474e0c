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
    """Median wall time of one call, its spread, and the median CPU time of the calling thread
    (all of a call's work with NITRIX_NUM_THREADS=1, and less disturbed by other load)."""
    fn()  # warm-up: compiles and caches
    times, cpu = [], []
    for _ in range(runs):
        c0, t0 = time.thread_time(), time.perf_counter()
        for _ in range(batch):
            fn()
        times.append((time.perf_counter() - t0) / batch)
        cpu.append((time.thread_time() - c0) / batch)
    times.sort()
    cpu.sort()
    return times[len(times) // 2], times[0], times[-1], cpu[len(cpu) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--gaussian", action="store_true",
                    help="also gaussian sigma=2 on a 256^3 float32 array (nitrix bench "
                         "gaussian_s2 is the C side)")
    a = ap.parse_args()
    if a.gaussian:
        vol = np.random.default_rng(1).random((256, 256, 256)).astype(np.float32)
        med, lo, hi, _ = per_call(lambda: nitrix.smoothing.gaussian(vol, sigma=2.0), 1, a.runs)
        print(f"  gaussian(sigma=2) 256^3 float32 from NumPy    {med:.4f} s  "
              f"(min {lo:.4f}, max {hi:.4f})")
    x = np.random.default_rng(0).random((8, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(nitrix.morphology.dilate(x, size=3),
                                  ndi.grey_dilation(x, size=3))
    # The C call alone, from the same process: nx_op_call through ctypes with every argument
    # made once (the input wrapped once, the output freed at once). The difference to the first
    # row is what the package adds per call.
    import ctypes as C
    from nitrix import _core
    lib, ctx = _core.lib, nitrix.default_context()
    ins = _core._In(1)
    _core._to_tensor(ctx, x, "x", ins, 0)
    keys = (C.c_char_p * 1)(b"size")
    vals = (C.c_char_p * 1)(b"3")
    out = (C.c_void_p * 1)()
    cptr = ctx._check()

    def raw():
        st = lib.nx_op_call(cptr, b"dilate", 1, ins.ptrs, 1, keys, vals, 1, out)
        assert st == 0
        lib.nx_tensor_free(out[0])

    rows = [
        ("nx_op_call through ctypes, arguments made once", raw),
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
        med, lo, hi, cpu = per_call(fn, a.batch, a.runs)
        print(f"  {name:48s} {med * 1e6:8.2f} us/call  (min {lo * 1e6:.2f}, max {hi * 1e6:.2f})"
              f"  thread cpu {cpu * 1e6:.2f} us")


if __name__ == "__main__":
    main()
