#!/usr/bin/python3
"""Golden cases of the smoothing family's Gaussian filter (golden/smoothing/<case>/, the format
of docs/fidelity.md), computed with scipy.ndimage only, never with nitrix:

  - scipy.ndimage.gaussian_filter in float64 (f32 cases: scipy run on the f32 input, which
    accumulates each pass in double and rounds it to f32, the behaviour nitrix matches);
  - explicit kernel sizes: numpy weights exp(-(t + shift)^2 / (2 sigma^2)) normalised, applied
    with scipy.ndimage.correlate1d axis by axis (shift 1/2 for even sizes, taps -k/2 .. k/2 - 1,
    which is where correlate1d puts an even kernel).

Run from anywhere with /usr/bin/python3 (numpy 1.24, scipy 1.10 are pinned):
    /usr/bin/python3 tools/gen-smoothing-golden.py
"""
import os
import shutil
import sys

import numpy as np
import scipy
import scipy.ndimage as ndi

PINNED = {"numpy": "1.24", "scipy": "1.10"}
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "smoothing")
SEED = 20261129
MODES = ["reflect", "mirror", "nearest", "constant", "wrap"]


def check_pins():
    have = {"numpy": np.__version__, "scipy": scipy.__version__}
    for name, want in PINNED.items():
        if not (have[name] == want or have[name].startswith(want + ".")):
            sys.exit(f"gen-smoothing-golden.py: {name} {have[name]} found, {want}.x pinned")
    return have


# Cases outside the divergent-op contract of runtime/divergent.def's gaussian_filter row (the
# recursive driver within atol 0.07 of the FIR for data in [0, 1]): the manifest's `contract`
# line says why, and the contract test runs its drivers on every other case.
NO_CONTRACT_SIZED = ("explicit kernel_size: the recursive driver has no taps and ignores it "
                     "(include/nitrix-smoothing.h)")
NO_CONTRACT_255 = ("data in [0, 255]: the registry's atol is for data in [0, 1] (the recursive "
                   "driver differs from scipy by 0.10 here, measured)")
NO_CONTRACT_RANGE = ("a zero constant border under data in [0.5, 1.5) steps by up to 1.5; the "
                     "registry's atol is for data in [0, 1]")


def write_case(name, dtype, x, out, options, generator, versions, contract=None):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), np.ascontiguousarray(x.astype(dtype)))
    np.save(os.path.join(d, "out.npy"), np.ascontiguousarray(out.astype(dtype)))
    lines = ["op = gaussian", f"dtype = {np.dtype(dtype).name}", "inputs = x.npy",
             "output = out.npy", f"options = {' '.join(f'{k}={v}' for k, v in options)}",
             f"generator = {generator}", f"numpy = {versions['numpy']}",
             f"scipy = {versions['scipy']}", f"seed = {SEED}"]
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write("\n".join(lines + ([f"contract = {contract}"] if contract else [])) + "\n")


def floats(v):
    return ",".join(repr(float(s)) for s in v)


def gauss_case(rng, versions, name, shape, sigma, dtype=np.float64, mode="reflect", cval=0.0,
               truncate=4.0, nspatial=0, contract=None, scale=None):
    # Positive inputs keep relative errors meaningful for the f32 cases; scale: integers
    # 0..scale instead (an image's range).
    if scale:
        x = rng.randint(0, scale + 1, size=shape).astype(dtype)
    else:
        x = (rng.rand(*shape) + 0.5).astype(dtype)
    nsp = nspatial or len(shape)
    sig = list(sigma) if len(sigma) == nsp else list(sigma) * nsp
    # scipy skips axes with sigma 0: the leading batch axes.
    full = [0.0] * (len(shape) - nsp) + sig
    out = ndi.gaussian_filter(x, full, mode=mode, cval=cval, truncate=truncate)
    assert out.dtype == x.dtype
    opts = [("sigma", floats(sigma)), ("truncate", repr(truncate)), ("mode", mode),
            ("cval", repr(cval)), ("spatial_rank", nsp)]
    write_case(name, dtype, x, out, opts,
               f"scipy.ndimage.gaussian_filter(x, {full}, mode={mode!r}, cval={cval}, "
               f"truncate={truncate})", versions, contract)


def sized_weights(sigma, k):
    t = np.arange(-(k // 2), k - k // 2, dtype=np.float64) + (0.5 if k % 2 == 0 else 0.0)
    w = np.exp(-0.5 / (sigma * sigma) * t * t)
    return w / w.sum()


def sized_case(rng, versions, name, shape, sigma, ksize, dtype=np.float64, mode="reflect"):
    x = (rng.rand(*shape) + 0.5).astype(dtype)
    y = x.copy()
    for ax in range(len(shape)):
        y = ndi.correlate1d(y, sized_weights(sigma[ax], ksize[ax]), axis=ax, mode=mode)
    opts = [("sigma", floats(sigma)), ("kernel_size", ",".join(str(k) for k in ksize)),
            ("mode", mode), ("spatial_rank", len(shape))]
    write_case(name, dtype, x, y, opts,
               "scipy.ndimage.correlate1d per axis with numpy weights exp(-(t+shift)^2/(2 s^2)) "
               "normalised, t = -k//2 .. k-k//2-1, shift 1/2 for even k", versions,
               NO_CONTRACT_SIZED)


def main():
    versions = check_pins()
    rng = np.random.RandomState(SEED)
    shutil.rmtree(ROOT, ignore_errors=True)
    gauss_case(rng, versions, "g1_reflect_f64", (40,), [2.5])
    gauss_case(rng, versions, "g2_aniso_f64", (17, 23), [1.5, 3.0])
    for m in MODES:
        gauss_case(rng, versions, f"g3_{m}_f64", (9, 10, 11), [1.2, 0.8, 2.0], mode=m,
                   cval=0.7 if m == "constant" else 0.0)
        gauss_case(rng, versions, f"g2_{m}_f32", (19, 21), [2.0], dtype=np.float32, mode=m,
                   cval=-0.25 if m == "constant" else 0.0)
    gauss_case(rng, versions, "g2_truncate_f64", (20, 16), [2.0, 1.3], truncate=2.2)
    gauss_case(rng, versions, "g2_batch_f64", (3, 16, 18), [1.7, 2.4], nspatial=2)
    gauss_case(rng, versions, "g1_wide_f64", (6,), [4.0])
    gauss_case(rng, versions, "g1_wide_wrap_f64", (7,), [3.0], mode="wrap")
    gauss_case(rng, versions, "g4_f32", (5, 6, 7, 8), [1.0], dtype=np.float32)
    gauss_case(rng, versions, "g3_big_f32", (32, 33, 34), [2.0], dtype=np.float32)
    sized_case(rng, versions, "k2_odd_f64", (15, 12), [2.0, 1.5], [5, 7])
    sized_case(rng, versions, "k2_even_f64", (15, 12), [2.0, 1.5], [4, 6], mode="nearest")
    sized_case(rng, versions, "k1_even_f32", (30,), [1.0], [2], dtype=np.float32)
    # a zero constant border: the entry point's padded-once path (the other constant cases have
    # cval != 0, which keeps the per-axis pads)
    gauss_case(rng, versions, "g3_constant0_f32", (12, 13, 14), [1.5], dtype=np.float32,
               mode="constant", cval=0.0, contract=NO_CONTRACT_RANGE)
    # the default driver at sigma 8 on 0-255 data (issue 27: auto was the recursive driver there)
    gauss_case(rng, versions, "g3_s8_u255_f64", (20, 22, 24), [8.0], scale=255,
               contract=NO_CONTRACT_255)


if __name__ == "__main__":
    main()
