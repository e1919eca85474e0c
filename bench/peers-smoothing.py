#!/usr/bin/python3
"""scipy.ndimage peers of the smoothing rows of `nitrix bench` (bench/bench-smoothing.c): the same
shape (256^3 f32, uniform in [0, 1)), the median of runs after a warm-up. Prints JSON lines with
the fields of `nitrix bench --json` (backend "scipy"). Run by hand in the same session as the
bench:

    /usr/bin/python3 bench/peers-smoothing.py [--runs N] [--rows gaussian_s2]

On the GPU machine (python3 there has torch with CUDA), the device rows' peers
(`NITRIX_BACKEND=cuda nitrix bench smoothing`): the same separable FIR as three conv3d passes
with (k,1,1), (1,k,1), (1,1,k) kernels of scipy's weights on the device, fp32 with TF32 off,
reflect borders by F.pad per pass, timed with CUDA events (median of >= 10 after warm-up):

    python3 bench/peers-smoothing.py --gpu [--runs N]

Where CuPy is installed, --gpu also times cupyx.scipy.ndimage.gaussian_filter (the issue's other
peer) on the same device array, each call synchronised.
"""
import argparse
import json
import time

import numpy as np


def median_spread(fn, runs):
    """Wall median, min, max and the median process CPU time (scipy runs on one thread)."""
    fn()
    times, cpu = [], []
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(times)), float(min(times)), float(max(times)), float(np.median(cpu))


def weights(sigma, truncate=4.0):
    """scipy.ndimage's _gaussian_kernel1d: exp(-t^2 / (2 sigma^2)) normalised, t = -r..r."""
    r = int(truncate * sigma + 0.5)
    t = np.arange(-r, r + 1, dtype=np.float64)
    w = np.exp(-0.5 / (sigma * sigma) * t * t)
    return w / w.sum()


def gpu_main(args):
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version(),
                      "device": torch.cuda.get_device_name(0)}), flush=True)
    g = torch.Generator(device=dev).manual_seed(20261129)
    x = torch.rand((1, 1, 256, 256, 256), generator=g, device=dev, dtype=torch.float32)
    runs = max(args.runs, 10)
    for name, sigma in (("gaussian_s2", 2.0), ("gaussian_recursive_s8", 8.0)):
        w = torch.tensor(weights(sigma), dtype=torch.float32, device=dev)
        k, r = w.numel(), w.numel() // 2
        ks = [w.view(1, 1, k, 1, 1), w.view(1, 1, 1, k, 1), w.view(1, 1, 1, 1, k)]
        pads = [(0, 0, 0, 0, r, r), (0, 0, r, r, 0, 0), (r, r, 0, 0, 0, 0)]

        def fir():
            y = x
            for kern, p in zip(ks, pads):
                y = F.conv3d(F.pad(y, p, mode="reflect"), kern)
            return y
        fir()
        fir()
        torch.cuda.synchronize()
        ts = []
        for _ in range(runs):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fir()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) / 1e3)
        # torch's "reflect" is scipy's "mirror"; timing only, the values are not compared
        print(json.dumps({"name": name, "backend": "torch-cuda", "dtype": "f32",
                          "shape": "[256,256,256]", "median_s": float(np.median(ts)),
                          "min_s": min(ts), "max_s": max(ts), "runs": runs,
                          "peer": f"torch {torch.__version__} conv3d x3 ({k} taps), TF32 off"}),
              flush=True)


def cupyx_rows(args):
    try:
        import cupy as cp
        import cupyx.scipy.ndimage as cnd
    except ImportError as e:
        print(json.dumps({"peer": "cupyx.scipy.ndimage", "skipped": str(e)}))
        return
    runs = max(args.runs, 10)
    x = cp.asarray(np.random.default_rng(20261129).random((256, 256, 256), dtype=np.float32))
    for name, sigma in (("gaussian_s2", 2.0), ("gaussian_recursive_s8", 8.0)):
        def fn():
            return cnd.gaussian_filter(x, sigma)
        for _ in range(3):
            fn()
        cp.cuda.Device().synchronize()
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            cp.cuda.Device().synchronize()
            ts.append(time.perf_counter() - t0)
        print(json.dumps({"name": name, "backend": "cupyx-cuda", "dtype": "f32",
                          "shape": "[256,256,256]", "median_s": float(np.median(ts)),
                          "min_s": min(ts), "max_s": max(ts), "runs": runs,
                          "peer": f"cupy {cp.__version__} cupyx.scipy.ndimage.gaussian_filter "
                                  f"sigma {sigma:g}"}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", default="", help="comma-separated name substrings")
    ap.add_argument("--gpu", action="store_true", help="the device rows' PyTorch peers")
    args = ap.parse_args()
    if args.gpu:
        gpu_main(args)
        cupyx_rows(args)
        return
    import scipy
    import scipy.ndimage as ndi
    rng = np.random.default_rng(20261129)
    u256 = rng.random((256, 256, 256), dtype=np.float32)
    rows = [
        ("gaussian_s2", lambda: ndi.gaussian_filter(u256, 2.0)),
        ("gaussian_recursive_s8", lambda: ndi.gaussian_filter(u256, 8.0)),
    ]
    want = [r for r in args.rows.split(",") if r]
    for name, fn in rows:
        if want and not any(w in name for w in want):
            continue
        med, lo, hi, cpu = median_spread(fn, args.runs)
        print(json.dumps({"name": name, "backend": "scipy", "dtype": "f32",
                          "shape": "[256,256,256]", "median_s": med, "min_s": lo, "max_s": hi,
                          "cpu_s": cpu, "runs": args.runs,
                          "peer": f"scipy {scipy.__version__}, numpy {np.__version__}"}))


if __name__ == "__main__":
    main()
