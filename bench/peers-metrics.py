#!/usr/bin/python3
"""scipy.ndimage peers of the metrics rows of `nitrix bench` (bench/bench-metrics.c): lncc with
radius 4 (a 9^3 window), reflect borders, on 256^3 float32 images of the same distribution
(moving uniform in [0, 1), fixed = sin(3 moving) + uniform noise in [-0.3, 0.3)), the median of
runs after a warm-up. Box sums are scipy.ndimage.uniform_filter times the window size, in
float32 as the inputs (scipy filters float32 in float32 output with a double accumulator):

  lncc_value_r4       the ANTs cc map and its mean;
  lncc_value_grad_r4  the same plus the closed-form moving gradient (four more box sums; the
                      forward box filter stands for its transpose, exact in the interior);
  lncc_grad_r4        the closed-form gradient alone.

Prints JSON lines with the fields of `nitrix bench --json` (backend "scipy"). Run by hand in the
same session as the bench:

    V/bin/python bench/peers-metrics.py [--runs N] [--rows lncc_value_r4]

With --gpu it times the device rows' PyTorch peer instead (on the GPU machine, same call as
`NITRIX_BACKEND=cuda nitrix bench lncc`): the same formula with box sums as three separable
conv3d passes of 9 taps (reflect padding), the value (mean of the cc map) and value + gradient
by torch.autograd, and the closed-form force; CUDA events around each call, TF32 off.
"""
import argparse
import json
import time

import numpy as np
import scipy
import scipy.ndimage as ndi

R, EPS = 4, 1e-5


def inputs(n=256):
    rng = np.random.default_rng(20261207)
    m = rng.random((n, n, n), dtype=np.float32)
    f = (np.sin(3 * m) + rng.uniform(-0.3, 0.3, size=m.shape)).astype(np.float32)
    return m, f


def box(a):
    k = 2 * R + 1
    return ndi.uniform_filter(a, size=k, mode="reflect") * np.float32(k ** 3)


def sums(m, f):
    n = np.float32((2 * R + 1) ** 3)
    sm, sf = box(m), box(f)
    cross = box(m * f) - sm * sf / n
    var_m = box(m * m) - sm * sm / n
    var_f = box(f * f) - sf * sf / n
    return n, sm, sf, cross, var_m, var_f


def value(m, f):
    _, _, _, cross, var_m, var_f = sums(m, f)
    return float((cross * cross / (var_m * var_f + np.float32(EPS))).mean())


def grad(m, f, with_value=False):
    n, sm, sf, cross, var_m, var_f = sums(m, f)
    d = var_m * var_f + np.float32(EPS)
    p = 2 * cross / d
    q = -p * cross * var_f / d
    g = f * box(p) - box(p * (sf / n)) + m * box(q) - box(q * (sm / n))
    if with_value:
        return float((cross * cross / d).mean()), g
    return g


def median_spread(fn, runs):
    fn()
    times, cpu = [], []
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(times)), float(min(times)), float(max(times)), float(np.median(cpu))


def gpu_main(args):
    import torch
    import torch.nn.functional as F
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                      "device": torch.cuda.get_device_name(0)}), flush=True)
    m0, f0 = inputs()
    m = torch.from_numpy(m0).to(dev).view(1, 1, 256, 256, 256)
    f = torch.from_numpy(f0).to(dev).view(1, 1, 256, 256, 256)
    k = 2 * R + 1
    w = torch.ones(k, device=dev, dtype=torch.float32)
    ks = [w.view(1, 1, k, 1, 1), w.view(1, 1, 1, k, 1), w.view(1, 1, 1, 1, k)]
    pads = [(0, 0, 0, 0, R, R), (0, 0, R, R, 0, 0), (R, R, 0, 0, 0, 0)]
    n = float(k ** 3)

    def tbox(a):
        for kern, p in zip(ks, pads):
            a = F.conv3d(F.pad(a, p, mode="reflect"), kern)
        return a

    def tsums(a, b):
        sa, sb = tbox(a), tbox(b)
        return sa, sb, tbox(a * b) - sa * sb / n, tbox(a * a) - sa * sa / n, \
            tbox(b * b) - sb * sb / n

    def tvalue(a, b):
        _, _, cross, va, vb = tsums(a, b)
        return (cross * cross / (va * vb + EPS)).mean()

    def value():
        with torch.no_grad():
            return tvalue(m, f)

    def value_grad():
        a = m.detach().requires_grad_(True)
        b = f.detach().requires_grad_(True)
        v = tvalue(a, b)
        v.backward()
        return v, a.grad, b.grad

    def force():
        with torch.no_grad():
            sm, sf, cross, vm, vf = tsums(m, f)
            d = vm * vf + EPS
            p = 2 * cross / d
            q = -p * cross * vf / d
            return f * tbox(p) - tbox(p * (sf / n)) + m * tbox(q) - tbox(q * (sm / n))

    runs = max(args.runs, 10)
    for name, fn in (("lncc_value_r4", value), ("lncc_value_grad_r4", value_grad),
                     ("lncc_grad_r4", force)):
        if args.rows and not any(r in name for r in args.rows.split(",")):
            continue
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(runs):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) / 1e3)
        print(json.dumps({"name": name, "backend": "torch-cuda", "dtype": "f32",
                          "shape": "[256,256,256]", "median_s": float(np.median(ts)),
                          "min_s": min(ts), "max_s": max(ts), "runs": runs,
                          "peer": f"torch {torch.__version__} separable conv3d box sums, "
                                  "autograd for the gradient, TF32 off"}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rows", default="")
    ap.add_argument("--gpu", action="store_true", help="the device rows' PyTorch peers")
    args = ap.parse_args()
    if args.gpu:
        gpu_main(args)
        return
    m, f = inputs()
    rows = {
        "lncc_value_r4": lambda: value(m, f),
        "lncc_value_grad_r4": lambda: grad(m, f, True),
        "lncc_grad_r4": lambda: grad(m, f),
    }
    print(json.dumps({"numpy": np.__version__, "scipy": scipy.__version__}), flush=True)
    for name, fn in rows.items():
        if args.rows and not any(r in name for r in args.rows.split(",")):
            continue
        med, lo, hi, cpu = median_spread(fn, args.runs)
        print(json.dumps({"name": name, "backend": "scipy", "dtype": "f32",
                          "shape": "[256,256,256]", "median_s": med, "runs": args.runs,
                          "min_s": lo, "max_s": hi, "cpu_s": cpu}), flush=True)


if __name__ == "__main__":
    main()
