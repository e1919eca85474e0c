#!/usr/bin/python3
"""scipy.ndimage peers of the morphology rows of `nitrix bench` (bench/bench-morphology.c): the
same shapes and densities, the median of runs after a warm-up. Prints JSON lines with the fields
of `nitrix bench --json` (backend "scipy"). Run by hand in the same session as the bench:

    /usr/bin/python3 bench/peers-morphology.py [--runs N] [--rows distance_transform_edt,dilate]

--gpu (on the device machine, whose python3 has torch with CUDA): the issue's PyTorch peer of the
device-resident dilation row, torch.nn.functional.max_pool3d 3^3, stride 1, padding 1 on a
[1, 1, 256, 256, 256] f32 tensor already on the GPU (the same window max as grey_dilation 3^3;
its border pads with -inf where scipy reflects, which does not change the cost), timed with CUDA
events: median (min, max) of --runs (at least 10) calls after 3 warm-up calls. Where CuPy is
installed, also the issue's other peer, cupyx.scipy.ndimage, on device arrays of the CPU rows'
shapes and densities (grey_dilation 3^3, distance_transform_edt, median_filter 3^3, label), each
call synchronised, the same median of runs.
"""
import argparse
import json
import time

import numpy as np

try:  # the CPU rows need scipy; the --gpu rows (torch) run where it may be missing
    import scipy
    import scipy.ndimage as ndi
except ImportError:
    scipy = ndi = None


def median_spread(fn, runs):
    """Wall-clock median, min and max, and the median CPU time of the process (on a loaded
    machine the wall clock includes waiting for a core)."""
    fn()
    times, cpu = [], []
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(times)), float(min(times)), float(max(times)), float(np.median(cpu))


def gpu_rows(runs):
    import torch  # only on the device machine
    import torch.nn.functional as F
    runs = max(runs, 10)
    dev = torch.device("cuda")
    x = torch.rand((1, 1, 256, 256, 256), dtype=torch.float32, device=dev,
                   generator=torch.Generator(device=dev).manual_seed(20261129))

    def pool():
        return F.max_pool3d(x, kernel_size=3, stride=1, padding=1)

    for _ in range(3):
        pool()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        pool()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    print(json.dumps({"name": "dilate_3x3x3", "backend": "torch-cuda", "dtype": "f32",
                      "shape": "[256,256,256]", "median_s": float(np.median(times)),
                      "min_s": float(min(times)), "max_s": float(max(times)), "runs": runs,
                      "peer": f"torch {torch.__version__} max_pool3d 3^3 stride 1 padding 1, "
                              f"{torch.cuda.get_device_name(0)}"}))


def cupyx_rows(runs):
    try:
        import cupy as cp
        import cupyx.scipy.ndimage as cnd
    except ImportError as e:
        print(json.dumps({"peer": "cupyx.scipy.ndimage", "skipped": str(e)}))
        return
    runs = max(runs, 10)
    rng = np.random.default_rng(20261129)
    u256 = cp.asarray(rng.random((256, 256, 256), dtype=np.float32))
    u128 = cp.asarray(rng.random((128, 128, 128), dtype=np.float32))
    m256 = cp.asarray((rng.random((256, 256, 256)) < 0.99).astype(np.float32))
    m128 = cp.asarray(rng.random((128, 128, 128)) < 0.5)
    rows = [
        ("dilate_3x3x3", "[256,256,256]", lambda: cnd.grey_dilation(u256, size=(3, 3, 3))),
        ("distance_transform_edt", "[256,256,256]", lambda: cnd.distance_transform_edt(m256)),
        ("median_filter_3x3x3", "[128,128,128]", lambda: cnd.median_filter(u128, size=3)),
        ("connected_components", "[128,128,128]", lambda: cnd.label(m128)),
    ]
    sync = cp.cuda.Device().synchronize
    for name, shape, fn in rows:
        for _ in range(3):
            fn()
        sync()
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t0)
        print(json.dumps({"name": name, "backend": "cupyx-cuda", "dtype": "f32", "shape": shape,
                          "median_s": float(np.median(times)), "min_s": float(min(times)),
                          "max_s": float(max(times)), "runs": runs,
                          "peer": f"cupy {cp.__version__} cupyx.scipy.ndimage, "
                                  f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}"}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", default="", help="comma-separated name substrings")
    ap.add_argument("--gpu", action="store_true", help="the PyTorch peer on the GPU")
    args = ap.parse_args()
    if args.gpu:
        gpu_rows(args.runs)
        cupyx_rows(args.runs)
        return
    rng = np.random.default_rng(20261129)
    u256 = rng.random((256, 256, 256), dtype=np.float32)
    u128 = rng.random((128, 128, 128), dtype=np.float32)
    m256 = (rng.random((256, 256, 256)) < 0.99).astype(np.float32)
    m128 = (rng.random((128, 128, 128)) < 0.5).astype(np.float32)
    rows = [
        ("dilate_3x3x3", "[256,256,256]", lambda: ndi.grey_dilation(u256, size=(3, 3, 3))),
        ("distance_transform_edt", "[256,256,256]", lambda: ndi.distance_transform_edt(m256)),
        ("median_filter_3x3x3", "[128,128,128]", lambda: ndi.median_filter(u128, size=3)),
        ("connected_components", "[128,128,128]", lambda: ndi.label(m128)),
    ]
    # The window-size rows (issue 27): grey_dilation and median_filter of cubic boxes on the
    # uniform 128^3 volume. scipy's median is linear in the window per voxel: w21 and w41 take
    # minutes a call (pass --runs 1 and --rows to pick them).
    for w in (3, 9, 21, 41):
        rows.append((f"dilate_w{w}", "[128,128,128]",
                     lambda w=w: ndi.grey_dilation(u128, size=(w, w, w))))
    for w in (3, 9, 21, 41):
        rows.append((f"median_filter_w{w}", "[128,128,128]",
                     lambda w=w: ndi.median_filter(u128, size=w)))
    want = [r for r in args.rows.split(",") if r]
    for name, shape, fn in rows:
        if want and not any(w in name for w in want):
            continue
        med, lo, hi, cpu = median_spread(fn, args.runs)
        print(json.dumps({"name": name, "backend": "scipy", "dtype": "f32", "shape": shape,
                          "median_s": med, "min_s": lo, "max_s": hi, "cpu_s": cpu,
                          "runs": args.runs,
                          "peer": f"scipy {scipy.__version__}, numpy {np.__version__}"}))


if __name__ == "__main__":
    main()
