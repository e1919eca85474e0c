#!/usr/bin/python3
"""NumPy peers of the sparse rows of `nitrix bench` (bench/bench-sparse.c): ELL matmul with
m = 65536, k_max = 32, 32 columns, f32, as a gather of B's rows and a reduce over the slot axis
(REAL: einsum over the gathered rows; LOG: a max-shifted logsumexp; TROPICAL: max of sums). The
median of runs after a warm-up; prints JSON lines with the fields of `nitrix bench --json`
(backend "numpy"). Run by hand in the same session as the bench:

    /usr/bin/python3 bench/peers-sparse.py [--runs N] [--rows real,log]

--gpu (on the GPU machine, its `python3` with torch + CUDA) times the H200 rows of the bench
(NITRIX_BACKEND=cuda: m = 4096, k_max = 32, 32 columns under REAL, max-plus and LOG; m = 10^6,
k_max = 16, 64 columns under REAL) in PyTorch on the device: b.index_select(0, idx) (the gathered
rows, [m, k, c]) then sum of v * rows / amax of v + rows / logsumexp of v + rows over the slots;
CUDA events around each call, median of --runs (default 20) after two warm-ups:

    python3 bench/peers-sparse.py --gpu [--runs N]
"""
import argparse
import json
import time

import numpy as np

M, K, C = 65536, 32, 32
GPU_ROWS = [  # name, algebra, m, k, c (bench/bench-sparse.c gpu_rows)
    ("semiring_ell_matmul_real_4096", "real", 4096, 32, 32),
    ("semiring_ell_matmul_maxplus_4096", "maxplus", 4096, 32, 32),
    ("semiring_ell_matmul_log_4096", "log", 4096, 32, 32),
    ("semiring_ell_matmul_real_1m", "real", 1000000, 16, 64),
]


def median_spread(fn, runs):
    """Wall median, min, max and the median process CPU time of fn() over runs, after a warm-up."""
    fn()
    times, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return float(np.median(times)), float(min(times)), float(max(times)), float(np.median(cpu))


def real(v, idx, b):
    return np.einsum("mk,mkc->mc", v, b[idx])


def log(v, idx, b):
    t = v[:, :, None] + b[idx]
    mx = t.max(axis=1, keepdims=True)
    return (mx + np.log(np.exp(t - mx).sum(axis=1, keepdims=True)))[:, 0, :]


def tropical(v, idx, b):
    return (v[:, :, None] + b[idx]).max(axis=1)


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


def gpu_main(args):
    import torch
    dev = torch.device("cuda")
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda,
                      "device": torch.cuda.get_device_name(0)}), flush=True)
    g = torch.Generator(device=dev).manual_seed(20261129)
    want = [r for r in args.rows.split(",") if r]
    for name, alg, m, k, c in GPU_ROWS:
        if want and not any(w in name for w in want):
            continue
        v = torch.rand((m, k), generator=g, device=dev) * 2 - 1
        idx = torch.randint(0, m, (m, k), generator=g, device=dev, dtype=torch.int32)
        b = torch.rand((m, c), generator=g, device=dev) * 2 - 1
        flat = idx.reshape(-1)

        def rows():
            return b.index_select(0, flat).view(m, k, c)
        if alg == "real":
            fn = lambda: (v[:, :, None] * rows()).sum(dim=1)  # noqa: E731
        elif alg == "maxplus":
            fn = lambda: (v[:, :, None] + rows()).amax(dim=1)  # noqa: E731
        else:
            fn = lambda: torch.logsumexp(v[:, :, None] + rows(), dim=1)  # noqa: E731
        med, lo, hi = gpu_timed(torch, fn, args.runs)
        nbytes = m * k * (8 + 4 * c) + 4 * m * c
        print(json.dumps({"name": name, "backend": "torch-cuda", "dtype": "f32",
                          "shape": f"m={m} k={k} c={c}", "median_s": med, "min_s": lo,
                          "max_s": hi, "runs": args.runs,
                          "peer": f"torch {torch.__version__} index_select + {alg} fold",
                          "g_events_per_s": m * k * c / med / 1e9,
                          "effective_tb_per_s": nbytes / med / 1e12}), flush=True)
        del v, idx, b, flat
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--rows", default="", help="comma-separated name substrings")
    ap.add_argument("--gpu", action="store_true", help="the H200 rows' torch peers")
    args = ap.parse_args()
    if args.gpu:
        args.runs = args.runs or 20
        gpu_main(args)
        return
    args.runs = args.runs or 3
    rng = np.random.default_rng(20261129)
    v = rng.uniform(-1, 1, size=(M, K)).astype(np.float32)
    idx = rng.integers(0, M, size=(M, K)).astype(np.int32)
    b = rng.uniform(-1, 1, size=(M, C)).astype(np.float32)
    rows = [("semiring_ell_matmul_real", real), ("semiring_ell_matmul_log", log),
            ("semiring_ell_matmul_tropical", tropical)]
    want = [r for r in args.rows.split(",") if r]
    for name, fn in rows:
        if want and not any(w in name for w in want):
            continue
        med, lo, hi, cpu = median_spread(lambda: fn(v, idx, b), args.runs)
        print(json.dumps({"name": name, "backend": "numpy", "dtype": "f32",
                          "shape": "m=65536 k=32 c=32", "median_s": med, "min_s": lo,
                          "max_s": hi, "cpu_s": cpu, "runs": args.runs,
                          "peer": f"numpy {np.__version__}",
                          "g_events_per_s": M * K * C / med / 1e9}))


if __name__ == "__main__":
    main()
