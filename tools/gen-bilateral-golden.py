#!/usr/bin/python3
"""Golden cases of the bilateral family (golden/bilateral/<case>/, the format of docs/fidelity.md),
computed in float64 by NumPy brute force and scipy.ndimage, never by nitrix:

  bilateral_gaussian      hand N-body reference: w_ij = m_ij exp(-|proj(f_i - f_j)|^2 / 2), rows
                          normalised, n_iters fixed-weight rounds, empty rows keep their value;
                          and a grid case whose features are the coordinates, against
                          scipy.ndimage.correlate with a normalised truncated Gaussian
                          (the index array and mask are the neighbourhood and mask options);
                          and with k (the spec's int neighbourhood): the k-NN below
  brute_force_knn         numpy.argsort (stable) of the squared distances, self first or excluded
  spatial_cube_neighbourhood  numpy index arithmetic (np.ravel_multi_index of clipped offsets);
                          outputs the index (out.npy) and the validity (validity.npy)
  susan_emulator          a loop over voxels (cube without centre and outside places) and
                          scipy.ndimage.median_filter(mode='nearest') where the weights sum < 1e-4
  metric_from_spd         numpy.linalg.cholesky

Indices (knn, cube) are stored as float64 (the runner casts nitrix's i64 to compare). Run from the
repository root:  /usr/bin/python3 tools/gen-bilateral-golden.py
"""
import os
import shutil
import sys

import numpy as np
import scipy
import scipy.ndimage as ndi

PINNED = {"numpy": "1.24", "scipy": "1.10"}
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "bilateral")
SEED = 20261129
VERSIONS = {"numpy": np.__version__, "scipy": scipy.__version__}


def check_pins():
    for name, want in PINNED.items():
        if not (VERSIONS[name] == want or VERSIONS[name].startswith(want + ".")):
            sys.exit(f"gen-bilateral-golden.py: {name} {VERSIONS[name]} found, {want}.x pinned")


def write_case(name, op, dtype, inputs, out, options, generator):
    """inputs: (key, array) for the op's positional inputs, or (key, array, option) for an array
    passed as a TENSOR option (the file is named in `options = option=key.npy`). out: the array of
    out.npy, or a list of (key, array) for several outputs in the row's order."""
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    files, tensor_opts = [], []
    for key, arr, *opt in inputs:
        fn = f"{key}.npy"
        a = arr if arr.dtype.kind in "biu" else arr.astype(dtype)
        np.save(os.path.join(d, fn), np.ascontiguousarray(a))
        if opt:
            tensor_opts.append((opt[0], fn))
        else:
            files.append(fn)
    out_dtype = np.float64 if op in ("brute_force_knn", "spatial_cube_neighbourhood") else dtype
    outs = out if isinstance(out, list) else [("out", out)]
    for key, arr in outs:
        a = arr if arr.dtype.kind == "b" else arr.astype(out_dtype)
        np.save(os.path.join(d, f"{key}.npy"), np.ascontiguousarray(a))
    options = list(options[:1]) + tensor_opts + list(options[1:])
    lines = [f"op = {op}", f"dtype = {np.dtype(dtype).name}", f"inputs = {' '.join(files)}",
             f"output = {' '.join(f'{k}.npy' for k, _ in outs)}",
             f"options = {' '.join(f'{k}={v}' for k, v in options)}",
             f"generator = {generator}", f"numpy = {VERSIONS['numpy']}",
             f"scipy = {VERSIONS['scipy']}", f"seed = {SEED}"]
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def rounded(a, dtype):
    """The operand as stored: f32 cases compute on the rounded values."""
    return np.asarray(a).astype(dtype).astype(np.float64)


def project(delta, kind, param):
    return delta / param if kind == "diagonal" else delta @ param


def bilateral(values, features, kind, param, idx, mask, n_iters):
    delta = features[:, None, :] - features[idx]
    q = (project(delta, kind, param) ** 2).sum(-1)
    w = np.exp(-0.5 * q) * mask
    den = w.sum(1, keepdims=True)
    wn = np.where(den > 0, w / np.where(den > 0, den, 1), 0)
    v = values
    for _ in range(n_iters):
        vn = (wn[:, :, None] * v[idx]).sum(1)
        v = np.where(den > 0, vn, v)
    return v


def knn(features, k, kind=None, param=None, exclude_self=False):
    delta = features[:, None, :] - features[None, :, :]
    q = (project(delta, kind, param) ** 2).sum(-1) if kind else (delta ** 2).sum(-1)
    n = len(features)
    q[np.arange(n), np.arange(n)] = np.inf if exclude_self else -np.inf
    return np.argsort(q, axis=1, kind="stable")[:, :k]


def cube(shape, half):
    shape = tuple(shape)
    offs = np.stack(np.meshgrid(*[np.arange(-half, half + 1)] * len(shape), indexing="ij"),
                    -1).reshape(-1, len(shape))
    pos = np.stack(np.meshgrid(*[np.arange(s) for s in shape], indexing="ij"),
                   -1).reshape(-1, len(shape))
    q = pos[:, None, :] + offs[None, :, :]
    inside = np.all((q >= 0) & (q < np.array(shape)), -1)
    qc = np.clip(q, 0, np.array(shape) - 1)
    idx = np.ravel_multi_index(tuple(qc[..., a] for a in range(len(shape))), shape)
    return idx, inside


def susan(image, nsp, sigma_s, sigma_i, half, use_median):
    sp = image.shape[image.ndim - nsp:]
    flat = image.reshape(-1, *sp)
    out = np.empty_like(flat)
    offs = np.stack(np.meshgrid(*[np.arange(-half, half + 1)] * nsp, indexing="ij"),
                    -1).reshape(-1, nsp)
    for b in range(flat.shape[0]):
        x = flat[b]
        med = ndi.median_filter(x, size=2 * half + 1, mode="nearest")
        for p in np.ndindex(*sp):
            num = den = 0.0
            for o in offs:
                if not o.any():
                    continue
                q = np.array(p) + o
                if np.any(q < 0) or np.any(q >= np.array(sp)):
                    continue
                w = np.exp(-(o @ o) / (2 * sigma_s ** 2)
                           - (x[p] - x[tuple(q)]) ** 2 / (2 * sigma_i ** 2))
                num += w * x[tuple(q)]
                den += w
            if den < 1e-4:
                out[b][p] = med[p] if use_median else x[p]
            else:
                out[b][p] = num / den
    return out.reshape(image.shape)


def random_mask(rng, n, k, p_drop, empty_rows=()):
    mask = rng.random((n, k)) >= p_drop
    for r in empty_rows:
        mask[r] = False
    return mask


def bilateral_cases(rng):
    n, k, dv, df = 40, 6, 2, 3
    gen = "numpy float64 N-body brute force (gather, exp(-q/2) masked, row-normalised)"
    for dtype in ("float64", "float32"):
        sfx = "f64" if dtype == "float64" else "f32"
        v = rounded(rng.standard_normal((n, dv)), dtype)
        f = rounded(rng.standard_normal((n, df)), dtype)
        sigma = rounded(rng.uniform(0.7, 2.0, df), dtype)
        idx = rng.integers(0, n, (n, k)).astype(np.int64)
        mask = random_mask(rng, n, k, 0.25, empty_rows=(3, 17))
        out = bilateral(v, f, "diagonal", sigma, idx, mask, 2)
        write_case(f"bil_diag_mask_{sfx}", "bilateral_gaussian", dtype,
                   [("values", v), ("features", f), ("metric", sigma),
                    ("index", idx, "neighbourhood"), ("mask", mask, "mask")], out,
                   [("metric", "diagonal"), ("n_iters", 2)], gen)
        # a rank-2 factor of a 3-d feature space, i32 indices, one round
        lf = rounded(rng.standard_normal((df, 2)) * 0.8, dtype)
        idx32 = rng.integers(0, n, (n, k)).astype(np.int32)
        mask = random_mask(rng, n, k, 0.1)
        out = bilateral(v, f, "factor", lf, idx32, mask, 1)
        write_case(f"bil_factor_lowrank_{sfx}", "bilateral_gaussian", dtype,
                   [("values", v), ("features", f), ("metric", lf),
                    ("index", idx32, "neighbourhood"), ("mask", mask, "mask")], out,
                   [("metric", "factor"), ("n_iters", 1)], gen)
        # k-NN neighbourhood under a full-rank factor (Cholesky of an SPD matrix)
        a = rng.standard_normal((df, df))
        lfull = rounded(np.linalg.cholesky(a @ a.T + df * np.eye(df)) * 0.5, dtype)
        nb = knn(f, 5, "factor", lfull)
        out = bilateral(v, f, "factor", lfull, nb, np.ones(nb.shape, bool), 3)
        write_case(f"bil_knn_factor_{sfx}", "bilateral_gaussian", dtype,
                   [("values", v), ("features", f), ("metric", lfull)], out,
                   [("metric", "factor"), ("k", 5), ("n_iters", 3)],
                   gen + "; k-NN by numpy.argsort (stable), self first")


def grid_case(rng):
    # Features are the coordinates only: one round is a normalised truncated Gaussian, which
    # scipy.ndimage.correlate gives independently (constant mode renormalised by the ones image).
    shape, half, sig = (9, 7), 2, np.array([1.3, 0.8])
    x = rng.standard_normal(shape)
    idx, inside = cube(shape, half)
    coords = np.stack(np.meshgrid(*[np.arange(s) for s in shape], indexing="ij"),
                      -1).reshape(-1, 2).astype(np.float64)
    o = np.arange(-half, half + 1)
    kern = np.exp(-0.5 * ((o[:, None] / sig[0]) ** 2 + (o[None, :] / sig[1]) ** 2))
    num = ndi.correlate(x, kern, mode="constant", cval=0.0)
    den = ndi.correlate(np.ones(shape), kern, mode="constant", cval=0.0)
    out = (num / den).reshape(-1, 1)
    write_case("bil_grid_gauss_f64", "bilateral_gaussian", "float64",
               [("values", x.reshape(-1, 1)), ("features", coords), ("metric", sig),
                ("index", idx.astype(np.int64), "neighbourhood"),
                ("mask", inside, "mask")], out,
               [("metric", "diagonal"), ("n_iters", 1)],
               "scipy.ndimage.correlate (constant) of a truncated Gaussian / correlate of ones")


def knn_cases(rng):
    gen = "numpy float64 squared distances, numpy.argsort (stable): ties to the lower index"
    for dtype in ("float64", "float32"):
        sfx = "f64" if dtype == "float64" else "f32"
        # duplicated points and a lattice make ties common
        f = rng.integers(-2, 3, (30, 3)).astype(np.float64)
        f[7] = f[2]
        f[20] = f[2]
        sigma = np.array([1.0, 2.0, 0.5])
        out = knn(f, 4, "diagonal", sigma)
        write_case(f"knn_diag_ties_{sfx}", "brute_force_knn", dtype,
                   [("features", f), ("metric", sigma)], out,
                   [("metric", "diagonal"), ("k", 4)], gen + "; self first")
        g = rounded(rng.standard_normal((25, 4)), dtype)
        lf = rounded(rng.standard_normal((4, 2)), dtype)
        out = knn(g, 6, "factor", lf, exclude_self=True)
        write_case(f"knn_factor_noself_{sfx}", "brute_force_knn", dtype,
                   [("features", g), ("metric", lf)], out,
                   [("metric", "factor"), ("k", 6), ("exclude_self", "true")], gen + "; self out")


def cube_cases():
    gen = "numpy index arithmetic: clipped offsets, numpy.ravel_multi_index"
    for name, shape, half in (("cube_2d_h1", (4, 5), 1), ("cube_3d_h1", (3, 4, 2), 1),
                              ("cube_1d_h2", (6,), 2)):
        idx, inside = cube(shape, half)
        write_case(name, "spatial_cube_neighbourhood", "float64",
                   [("grid", np.zeros(shape))], [("out", idx), ("validity", inside)],
                   [("half", half)], gen)


def susan_cases(rng):
    gen = ("numpy float64 loop over voxels (cube without centre, inside only); "
           "scipy.ndimage.median_filter(mode='nearest') where the weights sum < 1e-4")
    for dtype in ("float64", "float32"):
        sfx = "f64" if dtype == "float64" else "f32"
        x = rng.normal(10.0, 1.0, (7, 6, 5))
        x[3, 2, 2] = 40.0  # an isolated outlier: no neighbour alike, so the median
        x[0, 0, 0] = -30.0
        x = rounded(x, dtype)
        out = susan(x, 3, 1.2, 0.8, 1, True)
        write_case(f"susan_3d_{sfx}", "susan_emulator", dtype, [("image", x)], out,
                   [("sigma_space", 1.2), ("sigma_intensity", 0.8)], gen)
    # a batch of two 2-d slices, FSL's bthresh, half 2, no median
    x = rng.normal(0.0, 1.0, (2, 8, 9))
    x[1, 4, 4] = 25.0
    out = susan(x, 2, 1.5, 2.0 / np.sqrt(2.0), 2, False)
    write_case("susan_2d_batch_bt_f64", "susan_emulator", "float64", [("image", x)], out,
               [("spatial_rank", 2), ("sigma_space", 1.5), ("bthresh", 2.0), ("half", 2),
                ("use_median", "false")], gen)
    # a small 2-d image with the median branch (two isolated outliers), for the FD gradient test:
    # its own stream, so the other cases' draws stay as they were
    r2 = np.random.default_rng(SEED + 1)
    x = r2.normal(5.0, 1.0, (6, 7))
    x[2, 3] = 30.0
    x[4, 1] = -20.0
    out = susan(x, 2, 1.3, 0.9, 1, True)
    write_case("susan_2d_median_f64", "susan_emulator", "float64", [("image", x)], out,
               [("sigma_space", 1.3), ("sigma_intensity", 0.9)], gen)


def spd_cases(rng):
    for dtype in ("float64", "float32"):
        sfx = "f64" if dtype == "float64" else "f32"
        a = rng.standard_normal((4, 4))
        m = rounded(a @ a.T + 0.5 * np.eye(4), dtype)
        m = (m + m.T) / 2
        write_case(f"spd_{sfx}", "metric_from_spd", dtype, [("spd", m)],
                   np.linalg.cholesky(m), [], "numpy.linalg.cholesky (lower)")


def main():
    check_pins()
    shutil.rmtree(ROOT, ignore_errors=True)
    rng = np.random.default_rng(SEED)
    bilateral_cases(rng)
    grid_case(rng)
    knn_cases(rng)
    cube_cases()
    susan_cases(rng)
    spd_cases(rng)
    print(f"golden/bilateral: {len(os.listdir(ROOT))} cases")


if __name__ == "__main__":
    main()
