#!/usr/bin/python3
"""NumPy/scipy peers of the semiring bench rows (bench/bench-semiring.c), run by hand in the same
session as `nitrix bench semiring`:

    /usr/bin/python3 bench/peers-semiring.py [ROW ...]

    python3 bench/peers-semiring.py --gpu [--gauss-rows R]   (on the GPU machine: torch + CUDA)

Rows: maxplus, log, conv, gauss, gauss_grad (all by default); a trailing number is how many x rows
the Gaussian sum times (5000 by default). Inputs have the bench's shapes and
value ranges (uniform; the values themselves do not change the work). Each row prints the median
and spread of its timed runs. The Gaussian rows are O(M N): they time a slice of the x rows and
scale by M / rows, which is exact up to noise because every row of x costs the same.
"""
import json
import sys
import time

import numpy as np

if "--gpu" not in sys.argv:
    import scipy
    import scipy.ndimage
    import scipy.special

RNG = np.random.default_rng(20261129)


CPU_S = []  # process CPU seconds of each timed run: on a shared machine the wall time also
            # counts the time other processes held the cores


def timed(fn, runs):
    fn()  # warm-up
    ts = []
    CPU_S.clear()
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        ts.append(time.perf_counter() - t0)
        CPU_S.append(time.process_time() - c0)
    return float(np.median(ts)), min(ts), max(ts)


def cpu_note(scale=1.0):
    return " [cpu %.2f s]" % (float(np.median(CPU_S)) * scale)


def maxplus(a, b, block=64):
    """C[i, j] = max_k A[i, k] + B[k, j], blocked over i so the broadcast stays in cache."""
    c = np.empty((a.shape[0], b.shape[1]), a.dtype)
    for i in range(0, a.shape[0], block):
        c[i:i + block] = (a[i:i + block, :, None] + b[None]).max(axis=1)
    return c


def logmm(a, b, block=64):
    c = np.empty((a.shape[0], b.shape[1]), a.dtype)
    for i in range(0, a.shape[0], block):
        c[i:i + block] = scipy.special.logsumexp(a[i:i + block, :, None] + b[None], axis=1)
    return c


def conv(x, k):
    """y[..., co] = sum_ci correlate(x[..., ci], k[..., ci, co]), SAME (scipy centres the kernel,
    which for odd sizes is SAME's placement), zero padding."""
    y = np.zeros(x.shape[:-1] + (k.shape[-1],), x.dtype)
    for co in range(k.shape[-1]):
        for ci in range(k.shape[-2]):
            y[..., co] += scipy.ndimage.correlate(x[..., ci], k[..., ci, co], mode="constant")
    return y


def gauss(x, y, b, chunk=1000):
    out = np.empty(x.shape[0], x.dtype)
    for i in range(0, x.shape[0], chunk):
        d2 = ((x[i:i + chunk, None, :] - y[None]) ** 2).sum(-1)
        out[i:i + chunk] = np.exp(-d2) @ b
    return out


def gauss_grad(x, y, b, w, chunk=1000):
    """d/dx, d/dy, d/db of sum_i w_i sum_j exp(-|x_i - y_j|^2) b_j."""
    gx = np.empty_like(x)
    gy = np.zeros_like(y)
    gb = np.zeros_like(b)
    for i in range(0, x.shape[0], chunk):
        d = x[i:i + chunk, None, :] - y[None]
        k = np.exp(-(d ** 2).sum(-1))
        gb += w[i:i + chunk] @ k
        t = (-2.0 * w[i:i + chunk, None] * k * b[None])[..., None] * d
        gx[i:i + chunk] = t.sum(1)
        gy -= t.sum(0)
    return gx, gy, gb


def uniform(shape, lo, hi):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


# ---- --gpu: the H200 rows' peers (bench/bench-semiring.c gpu_rows), PyTorch on the device ----------

def gpu_timed(torch, fn, runs):
    """Median and spread in seconds of fn() over runs, CUDA events, after two warm-up calls."""
    fn()
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
    return float(np.median(ts)), min(ts), max(ts)


def gpu_row(name, shape, peer, t, runs, note=""):
    print(json.dumps({"name": name, "shape": shape, "peer": peer, "median_s": t[0],
                      "min_s": t[1], "max_s": t[2], "runs": runs, "note": note}), flush=True)


def gpu_main(argv):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    rows = int(argv[argv.index("--gauss-rows") + 1]) if "--gauss-rows" in argv else 1000000
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version(),
                      "device": torch.cuda.get_device_name(0)}), flush=True)
    g = torch.Generator(device=dev).manual_seed(20261129)

    def uni(shape, lo, hi):
        return torch.rand(shape, generator=g, device=dev, dtype=torch.float32) * (hi - lo) + lo

    a, b = uni((4096, 4096), -1, 1), uni((4096, 4096), -1, 1)
    gpu_row("semiring_matmul_real_4096", "[4096,4096]x[4096,4096]",
            "torch matmul, cuBLAS fp32, TF32 off", gpu_timed(torch, lambda: a @ b, 20), 20)
    del a, b
    # channels-last: x [1, 8, 32, 32, 32] stored as [1, 32, 32, 32, 8], the nitrix layout
    x = uni((1, 32, 32, 32, 8), 0, 1).permute(0, 4, 1, 2, 3)
    w = uni((16, 8, 3, 3, 3), -1, 1).contiguous(memory_format=torch.channels_last_3d)
    assert x.is_contiguous(memory_format=torch.channels_last_3d)
    conv = torch.nn.functional.conv3d
    gpu_row("semiring_conv3d_32", "[32^3,8]*[3^3,8,16]",
            "torch conv3d channels-last, cuDNN fp32, TF32 off, benchmark",
            gpu_timed(torch, lambda: conv(x, w, padding=1), 50), 50)
    n = 1000000
    xs, ys, bs = uni((n, 3), 0, 1), uni((n, 3), 0, 1), uni((n,), 0, 1)
    xr = xs[:rows]

    def gauss(chunk=2048):
        out = torch.empty(xr.shape[0], device=dev)
        y2 = (ys * ys).sum(1)
        for i in range(0, xr.shape[0], chunk):
            xc = xr[i:i + chunk]
            t = torch.addmm(y2[None, :], xc, ys.T, beta=1, alpha=-2)  # |y|^2 - 2 x.y
            t.add_((xc * xc).sum(1, keepdim=True)).neg_().exp_()      # exp(-|x - y|^2)
            out[i:i + chunk] = t @ bs
        return out
    runs = 3
    gpu_row("pairwise_reduce_gauss_sum", "M=%d N=%d D=3" % (rows, n),
            "torch chunked: exp(-(|x|^2 + |y|^2 - 2 x.y)) @ b, 2048-row chunks",
            gpu_timed(torch, gauss, runs), runs,
            "expanded squared distance (cuBLAS for x.y), f32")


def main():
    if "--gpu" in sys.argv:
        gpu_main(sys.argv)
        return
    want = [a for a in sys.argv[1:] if not a.isdigit()] or ["maxplus", "log", "conv", "gauss", "gauss_grad"]
    print("numpy %s, scipy %s" % (np.__version__, scipy.__version__))
    if "maxplus" in want or "log" in want:
        a, b = uniform((1024, 1024), -1, 1), uniform((1024, 1024), -1, 1)
        if "maxplus" in want:
            print("maxplus 1024^3: median %.3f s (%.3f-%.3f)" % timed(lambda: maxplus(a, b), 3)
                  + cpu_note())
        if "log" in want:
            print("log 1024^3: median %.3f s (%.3f-%.3f)" % timed(lambda: logmm(a, b), 1)
                  + cpu_note())
    if "conv" in want:
        x, k = uniform((128, 128, 128, 8), 0, 1), uniform((3, 3, 3, 8, 8), -1, 1)
        print("conv 3x3x3 128^3 8->8: median %.3f s (%.3f-%.3f)" % timed(lambda: conv(x, k), 1)
              + cpu_note())
    if "gauss" in want:
        n, rows = 100000, int(sys.argv[-1]) if sys.argv[-1].isdigit() else 5000
        x, y, b = uniform((n, 3), 0, 1), uniform((n, 3), 0, 1), uniform((n,), 0, 1)
        med, lo, hi = timed(lambda: gauss(x[:rows], y, b), 1)
        s = n / rows
        print("gauss sum M=N=1e5 (timed on %d rows, x%.0f): median %.2f s (%.2f-%.2f)"
              % (rows, s, med * s, lo * s, hi * s) + cpu_note(s))
    if "gauss_grad" in want:
        n, rows = 20000, 5000
        x, y, b = uniform((n, 3), 0, 1), uniform((n, 3), 0, 1), uniform((n,), 0, 1)
        w = uniform((n,), -1, 1)
        med, lo, hi = timed(lambda: gauss_grad(x[:rows], y, b, w[:rows]), 1)
        s = n / rows
        print("gauss grad M=N=2e4 (timed on %d rows, x%.0f): median %.2f s (%.2f-%.2f)"
              % (rows, s, med * s, lo * s, hi * s) + cpu_note(s))


if __name__ == "__main__":
    main()
