#!/usr/bin/python3
"""Golden cases of the morphology family (golden/morphology/<case>/, the format of
docs/fidelity.md), computed with scipy.ndimage and NumPy only, never with nitrix:

  - grey dilation, erosion, opening, closing and the median filter (scipy.ndimage.grey_*,
    median_filter) on seeded random inputs of small integers (ties are common, so the
    first-winner rule is exercised), by a flat box, a flat footprint or a non-flat structure;
  - binary dilation and erosion (scipy.ndimage.binary_*, border_value=0) as grey morphology of a
    0/1 input with mode=constant, cval=0;
  - chamfer (distance_transform_cdt) and exact Euclidean (distance_transform_edt) distance
    transforms; scipy's -1 for "no zero anywhere" is stored as +inf, nitrix's answer;
  - scipy.ndimage.label (the labels and their number, as the output num_labels, a 0-d int64,
    and as `count`);
  - max pooling with indices and max unpooling by a NumPy float64 brute force of PyTorch's rules.

The environment is pinned (numpy 1.24, scipy 1.10; the tool refuses others) and every manifest
names the versions and the seed, so a regenerated corpus differs from the committed one only when
the math does. Run from anywhere:
    /tmp/venv/bin/python tools/gen-morphology-golden.py
(any Python with numpy 1.24 and scipy 1.10: `python3 -m venv V && V/bin/pip install numpy==1.24.2
scipy==1.10.1`).
"""
import os
import shutil
import sys

import numpy as np
import scipy
import scipy.ndimage as ndi

PINNED = {"numpy": "1.24", "scipy": "1.10"}
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "morphology")
SEED = 20261129       # every case but the large volumes
SEED_BIG = 20261130   # the tiled EDT volumes and the slab-parallel labels
SEED_GAPS = 20261201  # the windowed EDT passes
SEED_LCC = 20261202   # the largest component (its own stream: earlier cases stay byte-identical)
SEED_WIN = 20261203   # large windows (per-axis folds, van Herk, the selection median) and dtypes

# The ops' names and option keywords as the op table has them (ops/ops.def, the descriptors'
# schemas): one place to change when the table renames one.
OP = {"dilate": "dilate", "erode": "erode", "open": "open", "close": "close",
      "median": "median_filter", "cdt": "distance_transform", "edt": "distance_transform_edt",
      "label": "connected_components", "pool": "max_pool_with_indices_nd",
      "unpool": "max_unpool_nd", "largest": "largest_connected_component"}
KW = {"size": "size", "footprint": "footprint", "structure": "structuring_element", "mode": "mode",
      "cval": "cval", "metric": "metric", "sampling": "sampling", "connectivity": "connectivity",
      "nspatial": "nspatial", "kernel": "kernel", "stride": "stride", "padding": "padding",
      "output_size": "output_size"}

GREY = {"median": ndi.median_filter, "dilate": ndi.grey_dilation, "erode": ndi.grey_erosion,
        "open": ndi.grey_opening, "close": ndi.grey_closing}
BINARY = {"dilate": ndi.binary_dilation, "erode": ndi.binary_erosion}

versions = {}
count = 0


def check_pins():
    have = {"numpy": np.__version__, "scipy": scipy.__version__}
    for name, want in PINNED.items():
        if not (have[name] == want or have[name].startswith(want + ".")):
            sys.exit(f"gen-morphology-golden.py: {name} {have[name]} found, {want}.x pinned")
    return have


def ints(v):
    return ",".join(str(int(s)) for s in v)


def floats(v):
    return ",".join(repr(float(s)) for s in v)


def write_case(name, op, dtype, inputs, outputs, options, generator, seed, extra=(),
               tensors=()):
    """inputs/outputs: (file key, array) in the op's order; options: (keyword, text) pairs, a
    tensor option's text being its file name in the case folder, saved from `tensors`; extra:
    more manifest lines."""
    global count
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    for key, arr in list(inputs) + list(outputs) + list(tensors):
        # (ascontiguousarray would make a 0-d array 1-d)
        np.save(os.path.join(d, f"{key}.npy"),
                arr if np.ndim(arr) == 0 else np.ascontiguousarray(arr))
    lines = [f"op = {OP[op]}", f"dtype = {np.dtype(dtype).name}",
             f"inputs = {' '.join(k + '.npy' for k, _ in inputs)}",
             f"output = {' '.join(k + '.npy' for k, _ in outputs)}",
             f"options = {' '.join(f'{KW[k]}={v}' for k, v in options)}",
             f"generator = {generator}", f"numpy = {versions['numpy']}",
             f"scipy = {versions['scipy']}", f"seed = {seed}"] + list(extra)
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    count += 1


def grey(rng, name, op, shape, dtype, *, size=None, footprint=None, structure=None,
         mode="reflect", cval=0.0, seed=SEED, x=None):
    if x is None:
        x = (rng.randint(-4, 5, size=shape).astype(dtype) +
             (rng.rand(*shape) > 0.7).astype(dtype) / 4)
    kw = {"mode": mode, "cval": cval}
    tensors, opts = [], []
    if size is not None:
        kw["size"] = size
        opts.append(("size", ints(size)))
    if footprint is not None:
        kw["footprint"] = footprint
        tensors.append(("fp", footprint.astype(np.uint8)))
        opts.append(("footprint", "fp.npy"))
    if structure is not None:
        kw["structure"] = structure
        tensors.append(("se", structure))
        opts.append(("structure", "se.npy"))
    opts += [("mode", mode), ("cval", repr(float(cval)))]
    out = GREY[op](x, **kw)
    assert out.dtype == x.dtype
    args = ", ".join(f"{k}={'<' + k + '>' if k in ('footprint', 'structure') else repr(v)}"
                     for k, v in kw.items())
    write_case(name, op, dtype, [("x", x)], [("out", out)], opts,
               f"scipy.ndimage.{GREY[op].__name__}(x, {args})", seed, tensors=tensors)


def int_input(rng, shape, dtype):
    """Values over most of an integer dtype's range (bool: half true), many ties."""
    if dtype == np.bool_:
        return rng.rand(*shape) > 0.5
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -2**40), min(int(info.max), 2**40)
    return rng.randint(lo // 7 * 7, hi // 7 * 7 + 1, size=shape, dtype=np.int64) \
        .astype(dtype) // 7 * 7


def binary(rng, name, op, shape, footprint):
    x = (rng.rand(*shape) > 0.6).astype(np.float64)
    out = BINARY[op](x, structure=footprint, border_value=0).astype(np.float64)
    fn = "binary_dilation" if op == "dilate" else "binary_erosion"
    write_case(name, op, np.float64, [("x", x)], [("out", out)],
               [("footprint", "fp.npy"), ("mode", "constant"), ("cval", "0.0")],
               f"scipy.ndimage.{fn}(x, structure=<footprint>, border_value=0) as float64", SEED,
               tensors=[("fp", footprint.astype(np.uint8))])


def cdt(rng, name, metric, shape, p_zero):
    mask = (rng.rand(*shape) > p_zero).astype(np.float64)
    d = ndi.distance_transform_cdt(mask, metric=metric).astype(np.float64)
    d[d < 0] = np.inf  # scipy marks "no background anywhere" with -1; nitrix gives +inf
    write_case(name, "cdt", np.float64, [("mask", mask)], [("out", d)], [("metric", metric)],
               f"scipy.ndimage.distance_transform_cdt(mask, metric={metric!r}), -1 as +inf",
               SEED)


def edt(name, mask, sampling, seed):
    d = ndi.distance_transform_edt(mask, sampling=sampling)
    # A u8 mask gives an f32 distance in nitrix (f64 only for an f64 mask): the case's dtype is
    # what the op computes in; the reference stays in float64.
    dtype = np.float64 if mask.dtype == np.float64 else np.float32
    write_case(name, "edt", dtype, [("mask", mask)], [("out", d)],
               [("sampling", floats(sampling))],
               f"scipy.ndimage.distance_transform_edt(mask, sampling={tuple(sampling)})", seed)


def label(name, mask, conn, seed):
    out, k = ndi.label(mask, ndi.generate_binary_structure(mask.ndim, conn))
    write_case(name, "label", np.int32, [("mask", mask)],
               [("out", out.astype(np.int32)), ("num_labels", np.array(k, dtype=np.int64))],
               [("connectivity", conn)],
               f"scipy.ndimage.label(mask, generate_binary_structure({mask.ndim}, {conn}))",
               seed, [f"count = {k}"])


def largest(name, mask, conn, seed):
    """The component with the most voxels (ties: the lowest label; none: all false), from
    scipy's labels."""
    lab, k = ndi.label(mask, ndi.generate_binary_structure(mask.ndim, conn))
    sizes = np.bincount(lab.ravel(), minlength=k + 1)
    sizes[0] = 0
    best = int(np.argmax(sizes)) if k > 0 else 0  # argmax: the first (lowest) of equal sizes
    out = (lab == best) & (best > 0)
    write_case(name, "largest", np.bool_, [("mask", mask)], [("out", out)],
               [("connectivity", conn)],
               f"scipy.ndimage.label(mask, generate_binary_structure({mask.ndim}, {conn})), "
               "then the label with the most voxels (ties: the lowest)", seed)


def max_pool(x, k, st, pad):
    """PyTorch's max_pool{d}d(return_indices=True), channels-last x [..., s_1..s_d, c]: windows
    of x padded with -inf, the first maximum in the window's C order (np.argmax; NaN first), and
    its flat index into s_1..s_d (the first in-image place when every value is -inf)."""
    d = len(k)
    lead, sp, c = x.shape[:-1 - d], x.shape[-1 - d:-1], x.shape[-1]
    out = tuple((s + 2 * p - kk) // t + 1 for s, p, kk, t in zip(sp, pad, k, st))
    xb = x.reshape((-1,) + sp + (c,)).astype(np.float64)
    vals = np.empty((xb.shape[0],) + out + (c,))
    idx = np.empty((xb.shape[0],) + out + (c,), dtype=np.int64)
    for b in range(xb.shape[0]):
        for o in np.ndindex(*out):
            lo = [oi * t - p for oi, t, p in zip(o, st, pad)]
            places = [tuple(l + w for l, w in zip(lo, kk)) for kk in np.ndindex(*k)]
            inside = [pl for pl in places if all(0 <= q < s for q, s in zip(pl, sp))]
            for ch in range(c):
                v = np.array([xb[(b,) + pl + (ch,)] if pl in inside else -np.inf
                              for pl in places])
                j = int(np.argmax(v))
                best = places[j] if v[j] > -np.inf or np.isnan(v[j]) else inside[0]
                vals[(b,) + o + (ch,)] = v[j]
                idx[(b,) + o + (ch,)] = np.ravel_multi_index(best, sp)
    shape = lead + out + (c,)
    return vals.reshape(shape).astype(x.dtype), idx.reshape(shape)


def max_unpool(vals, idx, size):
    """PyTorch's max_unpool: zeros, then y[.., idx, ch] = vals[.., o, ch] in C order."""
    d = len(size)
    c = vals.shape[-1]
    vb = vals.reshape((-1, int(np.prod(vals.shape[-1 - d:-1])), c))
    ib = idx.reshape(vb.shape)
    y = np.zeros((vb.shape[0], int(np.prod(size)), c), dtype=vals.dtype)
    for b in range(vb.shape[0]):
        for o in range(vb.shape[1]):
            for ch in range(c):
                y[b, ib[b, o, ch], ch] = vb[b, o, ch]
    return y.reshape(vals.shape[:-1 - d] + tuple(size) + (c,))


def pool(rng, name, shape, dtype, k, st, pad):
    x = rng.randint(-3, 4, size=shape).astype(dtype)  # small integers: ties are common
    vals, idx = max_pool(x, k, st, pad)
    size = shape[-1 - len(k):-1]  # unpooled back to x's spatial shape (output_size)
    geo = [("nspatial", len(k)), ("kernel", ints(k)), ("stride", ints(st)), ("padding", ints(pad))]
    write_case(name, "pool", dtype, [("x", x)], [("values", vals), ("indices", idx)], geo,
               "numpy float64 brute force of torch max_pool(return_indices=True), first max in "
               "window C order", SEED)
    write_case(name + "_unpool", "unpool", dtype, [("values", vals), ("indices", idx)],
               [("out", max_unpool(vals, idx, size))], geo + [("output_size", ints(size))],
               "numpy brute force of torch max_unpool (zeros, then y[idx] = values in C order)",
               SEED)


def main():
    versions.update(check_pins())
    shutil.rmtree(ROOT, ignore_errors=True)
    # One generator in a fixed order: each case's inputs are the draws the order gives it, so
    # new cases go last (earlier cases keep their data).
    rng = np.random.RandomState(SEED)
    f32, f64 = np.float32, np.float64
    # Flat boxes, odd and even, 1-4 D, both dtypes, every op.
    grey(rng, "d1_box5", "dilate", (17,), f64, size=(5,))
    grey(rng, "e1_box4", "erode", (17,), f64, size=(4,))
    grey(rng, "d1_box4", "dilate", (17,), f32, size=(4,))
    grey(rng, "d2_box3", "dilate", (9, 11), f32, size=(3, 3))
    grey(rng, "e2_box3", "erode", (9, 11), f32, size=(3, 3))
    grey(rng, "d2_box24", "dilate", (9, 11), f64, size=(2, 4))
    grey(rng, "e2_box24", "erode", (9, 11), f64, size=(2, 4))
    grey(rng, "o2_box3", "open", (9, 11), f64, size=(3, 3))
    grey(rng, "c2_box3", "close", (9, 11), f64, size=(3, 3))
    grey(rng, "o2_box2", "open", (8, 7), f32, size=(2, 2))
    grey(rng, "c2_box2", "close", (8, 7), f32, size=(2, 2))
    grey(rng, "d3_box3", "dilate", (6, 7, 5), f32, size=(3, 3, 3))
    grey(rng, "e3_box324", "erode", (6, 7, 5), f64, size=(3, 2, 4))
    grey(rng, "d4_box3", "dilate", (4, 5, 3, 6), f64, size=(3, 3, 2, 3))
    grey(rng, "e4_box3", "erode", (4, 5, 3, 6), f32, size=(3, 3, 3, 3))
    # Boundary modes other than reflect.
    grey(rng, "d2_nearest", "dilate", (7, 8), f64, size=(3, 4), mode="nearest")
    grey(rng, "e2_constant", "erode", (7, 8), f64, size=(3, 3), mode="constant", cval=1.5)
    grey(rng, "d2_mirror", "dilate", (7, 8), f64, size=(5, 3), mode="mirror")
    grey(rng, "e2_wrap", "erode", (7, 8), f64, size=(3, 4), mode="wrap")
    # Element wider than the image: the border rule repeats, as scipy extends.
    grey(rng, "d1_wide", "dilate", (4,), f64, size=(9,))
    grey(rng, "e2_wide", "erode", (3, 2), f64, size=(7, 5))
    # Flat footprints (non-box), odd and even.
    cross = ndi.generate_binary_structure(2, 1)
    grey(rng, "d2_cross", "dilate", (9, 8), f64, footprint=cross)
    grey(rng, "e2_cross", "erode", (9, 8), f64, footprint=cross)
    asym = np.array([[1, 0, 0, 1], [0, 1, 1, 1], [1, 1, 0, 0]], bool)
    grey(rng, "d2_asym", "dilate", (9, 8), f32, footprint=asym)
    grey(rng, "e2_asym", "erode", (9, 8), f32, footprint=asym)
    grey(rng, "c2_asym", "close", (9, 8), f64, footprint=asym)
    # Non-flat structures (added in f64 by scipy, also for f32 input).
    se = rng.uniform(-1, 1, size=(3, 4))
    grey(rng, "d2_se", "dilate", (8, 9), f64, structure=se)
    grey(rng, "e2_se", "erode", (8, 9), f64, structure=se)
    grey(rng, "d2_se32", "dilate", (8, 9), f32, structure=se)
    grey(rng, "o2_se", "open", (8, 9), f64, structure=se)
    grey(rng, "d2_fpse", "dilate", (8, 9), f64, footprint=asym, structure=se)
    se3 = rng.uniform(-1, 1, size=(2, 3, 3))
    grey(rng, "e3_se", "erode", (5, 6, 7), f64, structure=se3)
    # Binary: 0/1 input, border_value=0.
    binary(rng, "bd2_cross", "dilate", (10, 9), cross)
    binary(rng, "be2_cross", "erode", (10, 9), cross)
    binary(rng, "bd2_asym", "dilate", (10, 9), asym)
    binary(rng, "be2_asym", "erode", (10, 9), asym)
    binary(rng, "bd3_box", "dilate", (6, 5, 7), np.ones((3, 3, 3), bool))
    binary(rng, "be3_ball", "erode", (6, 5, 7), ndi.generate_binary_structure(3, 2))
    # Chamfer distance transforms, 1-4 D.
    cdt(rng, "cdt1_cb", "chessboard", (23,), 0.85)
    cdt(rng, "cdt2_cb", "chessboard", (13, 17), 0.95)
    cdt(rng, "cdt2_tc", "taxicab", (13, 17), 0.95)
    cdt(rng, "cdt3_cb", "chessboard", (7, 9, 8), 0.97)
    cdt(rng, "cdt3_tc", "taxicab", (7, 9, 8), 0.97)
    cdt(rng, "cdt4_tc", "taxicab", (4, 5, 6, 3), 0.97)
    cdt(rng, "cdt2_none", "taxicab", (4, 5), 2.0)  # no zero anywhere: all +inf
    # Exact Euclidean distance transforms, f64 masks.
    for name, shape, p_zero, sampling in [
            ("edt1", (31,), 0.9, (1.0,)), ("edt2", (14, 17), 0.95, (1.0, 1.0)),
            ("edt2_aniso", (14, 17), 0.95, (0.7, 1.9)),
            ("edt3_aniso", (8, 9, 7), 0.97, (1.5, 0.5, 1.0)),
            ("edt4", (4, 5, 6, 3), 0.95, (1.0, 2.0, 1.0, 0.5))]:
        edt(name, (rng.rand(*shape) > p_zero).astype(np.float64), sampling, SEED)
    # Labels, u8 masks.
    for name, shape, conn in [("cc2_c1", (15, 17), 1), ("cc2_c2", (15, 17), 2),
                              ("cc3_c1", (7, 8, 9), 1), ("cc3_c3", (7, 8, 9), 3),
                              ("cc1_c1", (40,), 1), ("cc4_c2", (4, 5, 4, 6), 2)]:
        label(name, (rng.rand(*shape) > 0.6).astype(np.uint8), conn, SEED)
    # Median filters (scipy's rank size // 2).
    grey(rng, "m2_box3", "median", (9, 11), f64, size=(3, 3))
    grey(rng, "m2_box24", "median", (9, 11), f32, size=(2, 4))
    grey(rng, "m3_box3", "median", (6, 7, 5), f64, size=(3, 3, 3))
    grey(rng, "m2_cross", "median", (9, 8), f64, footprint=cross)
    grey(rng, "m2_asym", "median", (9, 8), f64, footprint=asym, mode="nearest")
    grey(rng, "m1_wrap", "median", (13,), f32, size=(4,), mode="wrap")
    # Max pooling with indices and unpooling back to x's spatial shape.
    pool(rng, "pool1", (2, 11, 3), f64, (3,), (2,), (1,))
    pool(rng, "pool2", (9, 10, 2), f32, (3, 2), (2, 2), (1, 0))
    pool(rng, "pool2_overlap", (1, 7, 8, 1), f64, (2, 3), (1, 1), (1, 1))
    pool(rng, "pool3", (6, 7, 5, 2), f64, (2, 2, 2), (2, 2, 2), (0, 0, 0))
    pool(rng, "pool3_pad", (5, 6, 4, 3), f32, (3, 3, 2), (2, 1, 2), (1, 1, 1))
    # Larger volumes for the tiled EDT passes (u8 masks) and the slab-parallel label: partial
    # tiles, lines without a zero, components crossing slab borders at densities near
    # percolation.
    big = np.random.RandomState(SEED_BIG)
    edt("edt3_tiles", (big.rand(37, 45, 40) > 0.97).astype(np.uint8), (1.0, 1.0, 1.0), SEED_BIG)
    edt("edt3_tiles_aniso", (big.rand(21, 38, 33) > 0.995).astype(np.uint8), (0.7, 1.3, 1.1),
        SEED_BIG)
    # The windowed EDT passes and their fallback: dense zeros in the first rows (short windows),
    # five zeros in the rest (gaps longer than the window: the envelope), 150 columns (a partial
    # tile of 6).
    gaps = np.random.RandomState(SEED_GAPS)
    for name, sampling in [("edt2_gaps", (1.0, 1.0)), ("edt2_gaps_aniso", (0.8, 1.7))]:
        mask = (gaps.rand(200, 150) > 0.98).astype(np.uint8)
        mask[60:] = 1
        mask[gaps.randint(60, 200, 5), gaps.randint(0, 150, 5)] = 0
        edt(name, mask, sampling, SEED_GAPS)
    for name, shape, conn, p_one in [("cc3_slabs_c1", (70, 33, 29), 1, 0.65),
                                     ("cc3_slabs_c3", (64, 31, 27), 3, 0.25),
                                     ("cc3_slabs_c2", (41, 40, 21), 2, 0.4),
                                     ("cc2_slabs_c1", (300, 77), 1, 0.6),
                                     ("cc4_slabs_c4", (12, 9, 10, 11), 4, 0.2)]:
        label(name, (big.rand(*shape) < p_one).astype(np.uint8), conn, SEED_BIG)
    # The largest component, u8 masks; one with no foreground (all false).
    lcc = np.random.RandomState(SEED_LCC)
    for name, shape, conn in [("lcc2_c1", (15, 17), 1), ("lcc3_c3", (7, 8, 9), 3)]:
        largest(name, (lcc.rand(*shape) > 0.6).astype(np.uint8), conn, SEED_LCC)
    largest("lcc2_empty", np.zeros((4, 5), np.uint8), 2, SEED_LCC)
    # Large windows: boxes beyond the unrolled passes' budget (per-axis window folds below extent
    # 32, van Herk scans from there), open/close whose fused passes exploded the compiler, medians
    # of more than 64 places (the selection extern); non-cubic sizes, every border rule.
    win = np.random.RandomState(SEED_WIN)
    W = dict(seed=SEED_WIN)
    grey(win, "d3_box9", "dilate", (11, 12, 10), f32, size=(9, 9, 9), **W)
    grey(win, "e3_box9", "erode", (11, 12, 10), f64, size=(9, 9, 9), **W)
    grey(win, "d3_box21", "dilate", (13, 9, 11), f32, size=(21, 21, 21), **W)
    grey(win, "e3_box21_nearest", "erode", (13, 9, 11), f32, size=(21, 21, 21), mode="nearest",
         **W)
    grey(win, "d3_box_mixed", "dilate", (14, 12, 9), f64, size=(5, 33, 2), **W)
    grey(win, "e3_box_mixed", "erode", (14, 12, 9), f32, size=(34, 7, 3), mode="mirror", **W)
    grey(win, "d1_box40", "dilate", (70,), f64, size=(40,), **W)
    grey(win, "e1_box33_wrap", "erode", (50,), f32, size=(33,), mode="wrap", **W)
    grey(win, "d2_box35_constant", "dilate", (41, 37), f32, size=(35, 32), mode="constant",
         cval=2.5, **W)
    grey(win, "e2_box41_wide", "erode", (9, 12), f64, size=(41, 40), **W)
    grey(win, "o3_box5", "open", (32, 32, 32), f32, size=(5, 5, 5), **W)
    grey(win, "c3_box5", "close", (32, 32, 32), f32, size=(5, 5, 5), **W)
    grey(win, "c3_box357", "close", (20, 18, 16), f32, size=(3, 5, 7), **W)
    grey(win, "o3_box3", "open", (12, 11, 10), f64, size=(3, 3, 3), **W)
    grey(win, "o3_box21", "open", (13, 14, 12), f32, size=(21, 9, 33), mode="wrap", **W)
    ball = ndi.iterate_structure(ndi.generate_binary_structure(3, 1), 4)
    grey(win, "d3_ball9", "dilate", (12, 11, 10), f32, footprint=ball, **W)
    grey(win, "m3_box9", "median", (12, 11, 10), f32, size=(9, 9, 9), **W)
    grey(win, "m3_box21", "median", (9, 8, 7), f64, size=(21, 21, 21), **W)
    grey(win, "m3_box_mixed", "median", (14, 12, 9), f32, size=(5, 9, 4), mode="mirror", **W)
    grey(win, "m3_ball9", "median", (12, 11, 10), f64, footprint=ball, mode="nearest", **W)
    grey(win, "m2_box10_wrap", "median", (15, 13), f32, size=(10, 10), mode="wrap", **W)
    grey(win, "m2_box9_constant", "median", (15, 13), f64, size=(9, 9), mode="constant",
         cval=1.25, **W)
    # Integer and bool inputs keep their dtype (scipy's results do), small and large windows.
    for dt, tag in [(np.uint8, "u8"), (np.bool_, "bool"), (np.int8, "i8"), (np.int16, "i16"),
                    (np.int32, "i32"), (np.int64, "i64")]:
        for op, size in [("dilate", (3, 3, 3)), ("erode", (3, 3, 3)), ("open", (3, 3, 3)),
                         ("close", (5, 5, 5)), ("median", (3, 3, 3)), ("dilate", (9, 33, 4)),
                         ("median", (5, 5, 5))]:
            name = f"{op[0]}3_{tag}_{'x'.join(str(v) for v in size)}"
            grey(win, name, op, (10, 36, 9), dt, size=size, x=int_input(win, (10, 36, 9), dt),
                 **W)
    grey(win, "d2_u8_cross", "dilate", (9, 8), np.uint8, footprint=cross,
         x=int_input(win, (9, 8), np.uint8), **W)
    grey(win, "m2_bool_asym", "median", (9, 8), np.bool_, footprint=asym,
         x=int_input(win, (9, 8), np.bool_), **W)
    print(f"golden/morphology: {count} cases")


if __name__ == "__main__":
    main()
