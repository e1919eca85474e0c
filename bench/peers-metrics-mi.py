#!/usr/bin/python3
"""NumPy peers of the mutual-information rows of `nitrix bench` (bench/bench-metrics-mi.c): the
same shapes and distributions (256^3 f32; moving uniform in [0, 1), fixed = 0.7 moving^2 + 0.3 u),
the median of runs after a warm-up. Prints JSON lines with the fields of `nitrix bench --json`
(backend "numpy"). Run by hand in the same session as the bench:

    V/bin/python bench/peers-metrics-mi.py [--runs N] [--rows mutual_information_32]

- mutual_information_32: numpy.histogram2d with 32 bins over each image's min..max, then
  MI = sum_{P > 0} P log(P / (p_m p_f)) (hard bins: the issue's peer).
- mi_grad_32: the same triangular Parzen histogram as nitrix (four numpy.bincount passes over the
  flat cell index) and the closed-form Mattes gradient by fancy indexing.

With --gpu (on the GPU machine, same call as `NITRIX_BACKEND=cuda nitrix bench mutual_information,mi_grad`)
it times the PyTorch peers on the device instead: the same triangular Parzen histogram by four
scatter_add passes over the flat cell index, MI from it, and mi_grad as torch.autograd's gradient
of that MI with respect to moving; CUDA events around each call.
"""
import argparse
import json
import time

import numpy as np

BINS = 32


def median_spread(fn, runs):
    fn()
    times, cpu = [], []
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(times)), float(min(times)), float(max(times)), float(np.median(cpu))


def mi_hard(m, f):
    h, _, _ = np.histogram2d(m.ravel(), f.ravel(), bins=BINS)
    p = h / h.sum()
    pm, pf = p.sum(1), p.sum(0)
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] / np.outer(pm, pf)[nz])))


def soft_bin(x):
    lo, hi = x.min(), x.max()
    s = np.clip((x - lo) / max(hi - lo, 1e-12) * (BINS - 1), 0, BINS - 1)
    low = np.minimum(np.floor(s), BINS - 2).astype(np.int32)
    return low, (s - low).astype(x.dtype), lo, hi


def mi_grad(m, f):
    x, y = m.ravel(), f.ravel()
    lm, tm, lo, hi = soft_bin(x)
    lf, tf, _, _ = soft_bin(y)
    base = lm * BINS + lf
    h = np.zeros(BINS * BINS)
    for da, wa in ((0, 1 - tm), (1, tm)):
        for db, wb in ((0, 1 - tf), (1, tf)):
            h += np.bincount(base + (da * BINS + db), weights=wa * wb, minlength=BINS * BINS)
    p = (h / h.sum()).reshape(BINS, BINS)
    pm = p.sum(1)
    with np.errstate(divide="ignore"):
        lp = np.log(np.where(p > 0, p, 1))
        w = np.where(p > 0, lp - np.log(np.where(pm > 0, pm, 1))[:, None], 0.0)
    d = (w[1:] - w[:-1]).astype(x.dtype).ravel()
    s = np.float32((BINS - 1) / max(hi - lo, 1e-6) / x.size)
    g = s * ((1 - tf) * d[base] + tf * d[base + 1])
    return g.reshape(m.shape)


def gpu_main(args, m0, f0):
    import torch
    dev = torch.device("cuda")
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                      "device": torch.cuda.get_device_name(0)}), flush=True)
    m = torch.from_numpy(m0).to(dev).ravel()
    f = torch.from_numpy(f0).to(dev).ravel()

    def tbin(x):
        lo, hi = x.detach().min(), x.detach().max()
        s = torch.clamp((x - lo) / torch.clamp(hi - lo, min=1e-12) * (BINS - 1), 0, BINS - 1)
        low = torch.clamp(torch.floor(s.detach()), max=BINS - 2)
        return low.long(), s - low

    def tmi(a, b):
        la, ta = tbin(a)
        lb, tb = tbin(b)
        base = la * BINS + lb
        h = torch.zeros(BINS * BINS, device=dev, dtype=a.dtype)
        for da, wa in ((0, 1 - ta), (1, ta)):
            for db, wb in ((0, 1 - tb), (1, tb)):
                h = h.scatter_add(0, base + (da * BINS + db), wa * wb)
        p = (h / h.sum()).view(BINS, BINS)
        pa, pb = p.sum(1), p.sum(0)
        nz = p > 0
        return (p[nz] * torch.log(p[nz] / torch.outer(pa, pb)[nz])).sum()

    def value():
        with torch.no_grad():
            return tmi(m, f)

    def grad():
        a = m.detach().requires_grad_(True)
        v = tmi(a, f)
        v.backward()
        return a.grad

    runs = max(args.runs, 10)
    for name, fn in (("mutual_information_32", value), ("mi_grad_32", grad)):
        if args.rows and name not in args.rows.split(","):
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
                          "shape": "[256,256,256] x2", "median_s": float(np.median(ts)),
                          "min_s": min(ts), "max_s": max(ts), "runs": runs,
                          "peer": f"torch {torch.__version__} scatter_add Parzen histogram, "
                                  "autograd for mi_grad"}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rows", default="")
    ap.add_argument("--gpu", action="store_true", help="the device rows' PyTorch peers")
    args = ap.parse_args()
    rng = np.random.default_rng(20261207)
    u = rng.random((256, 256, 256))
    v = rng.random((256, 256, 256))
    m = u.astype(np.float32)
    f = (0.7 * u * u + 0.3 * v).astype(np.float32)
    del u, v
    if args.gpu:
        gpu_main(args, m, f)
        return
    print(json.dumps({"numpy": np.__version__}), flush=True)
    for name, fn in (("mutual_information_32", lambda: mi_hard(m, f)),
                     ("mi_grad_32", lambda: mi_grad(m, f))):
        if args.rows and name not in args.rows.split(","):
            continue
        med, lo, hi, cpu = median_spread(fn, args.runs)
        print(json.dumps({"name": name, "backend": "numpy", "dtype": "f32",
                          "shape": "[256,256,256] x2", "median_s": med, "runs": args.runs,
                          "min_s": lo, "max_s": hi, "note": f"cpu time {cpu:.4f} s"}), flush=True)


if __name__ == "__main__":
    main()
