#!/usr/bin/python3
"""Golden data for tests/ops/sparse: ELL semiring contractions and the sparse builders.

Oracles are independent of nitrix: float64 NumPy brute force over the slots of each row
(C_ij = (+)_p v_ip (x) B[idx_ip, j]) or over the dense matrix, scipy.special.logsumexp for LOG and
scipy.ndimage.laplace for the grid Laplacian. Writes tests/ops/sparse/data/*.npy and manifest.txt
(one case per line: kind name args...). Run from the repository root:

    /usr/bin/python3 tools/gen-sparse-golden.py
"""
import os
import sys

import numpy as np
import scipy
import scipy.ndimage
import scipy.special

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ops", "sparse",
                   "data")
ALGEBRAS = ["real", "log", "tropical_max_plus", "tropical_min_plus", "boolean", "euclidean"]
IDENTITY = {"real": 0.0, "log": -np.inf, "tropical_max_plus": -np.inf,
            "tropical_min_plus": np.inf, "boolean": 0.0, "euclidean": 0.0,
            "maxtimes": -np.inf, "probor": 0.0}
# User semirings, as formulas the C test parses (a builtin-monoid plus and a custom one).
USER = {"maxtimes": "plus = max(a, b); times = a * b; zero = -inf",
        "probor": "plus = a + b - a * b; times = a * b; zero = 0"}

rng = np.random.RandomState(20261129)
lines = []


def times(sr, a, b):
    if sr in ("real", "maxtimes", "probor"):
        return a * b
    if sr == "boolean":
        return ((a != 0) & (b != 0)).astype(np.float64)
    if sr == "euclidean":
        return (a - b) ** 2
    return a + b


def fold(sr, t, axis):
    """(+) over axis, in slot order (the custom probor fold is sequential)."""
    if sr in ("real", "euclidean"):
        r = t.sum(axis=axis)
        return np.sqrt(np.maximum(r, 0)) if sr == "euclidean" else r
    if sr == "log":
        return scipy.special.logsumexp(t, axis=axis)
    if sr in ("tropical_max_plus", "boolean", "maxtimes"):
        r = t.max(axis=axis, initial=-np.inf)
        return np.maximum(r, 0) if sr == "boolean" else r
    if sr == "tropical_min_plus":
        return t.min(axis=axis, initial=np.inf)
    if sr == "probor":
        t = np.moveaxis(t, axis, -1)
        acc = np.zeros(t.shape[:-1])
        for p in range(t.shape[-1]):
            acc = acc + t[..., p] - acc * t[..., p]
        return acc
    raise ValueError(sr)


def save(name, **arrays):
    for k, v in arrays.items():
        np.save(os.path.join(OUT, f"{name}_{k}.npy"), np.ascontiguousarray(v))


def random_ell(m, k, n_cols, identity, sr, idt=np.int32, pads=True):
    """values/indices [m, k]; row i has a random count of real slots, the rest are pads."""
    if sr == "boolean":
        v = (rng.rand(m, k) > 0.3).astype(np.float64)
    elif sr == "probor":
        v = rng.uniform(0.05, 0.95, size=(m, k))
    else:
        v = rng.uniform(-1.5, 1.5, size=(m, k))
    idx = rng.randint(0, n_cols, size=(m, k))
    if pads:
        deg = rng.randint(0, k + 1, size=m)
        deg[0] = k  # a full row
        if m > 2:
            deg[2] = 0  # an all-pad row
        for i in range(m):
            v[i, deg[i]:] = identity
            idx[i, deg[i]:] = 0
    return v, idx.astype(idt)


def ell_matmul_ref(sr, v, idx, b):
    g = b[..., idx, :]  # [.., m, k, c]
    return fold(sr, times(sr, v[:, :, None], g), -2)


def matmul_cases():
    for sr in ALGEBRAS + list(USER):
        for dt in (np.float64, np.float32):
            m, k, n_cols, c = 7, 4, 9, 3
            ident = IDENTITY[sr]
            v, idx = random_ell(m, k, n_cols, ident, sr, np.int32 if dt == np.float32 else np.int64)
            if sr == "probor":
                b = rng.uniform(0.05, 0.95, size=(n_cols, c))
            else:
                b = rng.uniform(-2, 2, size=(n_cols, c))
            if sr in ("real", "log"):
                b = rng.uniform(-2, 2, size=(2, n_cols, c))  # a batch over B's leading dim
            v = v.astype(dt)
            b = b.astype(dt)
            out = ell_matmul_ref(sr, v.astype(np.float64), idx, b.astype(np.float64))
            name = f"mm_{sr}_{np.dtype(dt).name}"
            save(name, values=v, indices=idx, b=b, out=out.astype(dt))
            lines.append(f"matmul {name} {sr} {n_cols} {ident!r}")


def rmatvec_cases():
    for dt in (np.float64, np.float32):
        for batch in ((), (3,)):
            m, k, n_cols, c = 8, 5, 6, 2
            v, idx = random_ell(m, k, n_cols, 0.0, "real")
            x = rng.uniform(-2, 2, size=batch + (m, c))
            a = np.zeros((m, n_cols))
            for i in range(m):
                for p in range(k):
                    a[i, idx[i, p]] += v[i, p]
            out = np.swapaxes(a, 0, 1) @ x
            name = f"rmv_{len(batch)}_{np.dtype(dt).name}"
            save(name, values=v.astype(dt), indices=idx, x=x.astype(dt), out=out.astype(dt))
            lines.append(f"rmatvec {name} real {n_cols} 0.0")


def softmax_cases():
    for dt in (np.float64, np.float32):
        m, k = 6, 5
        v, idx = random_ell(m, k, 4, 0.0, "real")
        s = rng.uniform(-3, 3, size=(2, m, k))
        pad = v == 0.0
        out = np.zeros_like(s)
        for bi in range(2):
            for i in range(m):
                keep = ~pad[i]
                if keep.any():
                    e = np.exp(s[bi, i, keep] - s[bi, i, keep].max())
                    out[bi, i, keep] = e / e.sum()
        name = f"smax_{np.dtype(dt).name}"
        save(name, values=v.astype(dt), indices=idx, x=s.astype(dt), out=out.astype(dt))
        lines.append(f"softmax {name} - 4 0.0")


def from_dense_ref(d, k, threshold, symmetrize):
    m, n = d.shape
    keep = np.zeros((m, n), bool)
    for i in range(m):
        cols = [j for j in range(n) if abs(d[i, j]) > threshold]
        cols.sort(key=lambda j: (-abs(d[i, j]), j))
        if k > 0:
            cols = cols[:k]
        keep[i, cols] = True
    if symmetrize:
        keep = keep | keep.T
    kk = max(int(keep.sum(1).max()), k if (k > 0 and not symmetrize) else 0)
    v = np.zeros((m, kk))
    idx = np.zeros((m, kk), np.int64)
    for i in range(m):
        cols = np.nonzero(keep[i])[0]
        v[i, :len(cols)] = d[i, cols]
        idx[i, :len(cols)] = cols
    return v, idx


def from_dense_cases():
    d = rng.uniform(-1, 1, size=(6, 7))
    d[rng.rand(6, 7) < 0.3] = 0.0
    d[1, :] = 0.0  # an empty row
    d[2, 3], d[2, 5] = 0.9, -0.9  # a magnitude tie: the lower column wins
    for name, k, thr, sym, dd in (("fd_top3", 3, 0.1, 0, d), ("fd_all", 0, 0.0, 0, d),
                                  ("fd_sym2", 2, 0.0, 1, d[:, :6])):
        v, idx = from_dense_ref(dd, k, thr, sym)
        save(name, dense=dd, values=v, indices=idx)
        lines.append(f"from_dense {name} {k} {thr!r} {sym}")


def laplace_cases():
    for shape in ((9,), (5, 6), (3, 4, 5)):
        x = rng.uniform(-1, 1, size=shape)
        for mode in ("nearest", "wrap", "reflect"):
            name = f"lap_{len(shape)}d_{mode}"
            save(name, x=x, out=scipy.ndimage.laplace(x, mode=mode))
            lines.append(f"laplace {name} {mode} {len(shape)} " + ",".join(map(str, shape)))


def stencil_cases():
    # A random 3x2 stencil equals scipy.ndimage.correlate with the origin at the window's centre
    # (offsets t - w // 2).
    x = rng.uniform(-1, 1, size=(5, 7))
    w = rng.uniform(-1, 1, size=(3, 2))
    for mode in ("nearest", "wrap", "reflect"):
        name = f"st_{mode}"
        save(name, x=x, w=w, out=scipy.ndimage.correlate(x, w, mode=mode))
        lines.append(f"stencil {name} {mode} 2 5,7")


def sectioned_cases():
    n_rows, n_cols, c = 23, 11, 3
    deg = rng.randint(0, 10, size=n_rows)
    deg[:4] = [0, 1, 2, 9]
    offsets = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    nnz = int(offsets[-1])
    idx = rng.randint(0, n_cols, size=nnz).astype(np.int32)
    val = rng.uniform(-1, 1, size=nnz)
    b = rng.uniform(-1, 1, size=(n_cols, c))
    x = rng.uniform(-1, 1, size=(n_rows, c))
    for sr in ("real", "log", "tropical_max_plus"):
        out = np.empty((n_rows, c))
        for i in range(n_rows):
            lo, hi = offsets[i], offsets[i + 1]
            t = times(sr, val[lo:hi, None], b[idx[lo:hi]])
            out[i] = fold(sr, t, 0) if hi > lo else IDENTITY[sr]
        name = f"sec_{sr}"
        save(name, offsets=offsets, indices=idx, values=val, b=b, out=out)
        lines.append(f"sectioned {name} {sr} {n_cols} {IDENTITY[sr]!r}")
    a = np.zeros((n_rows, n_cols))
    for i in range(n_rows):
        for p in range(offsets[i], offsets[i + 1]):
            a[i, idx[p]] += val[p]
    save("sec_rmv", offsets=offsets, indices=idx, values=val, x=x, out=a.T @ x)
    lines.append(f"sectioned_rmatvec sec_rmv real {n_cols} 0.0")


def edge_cases():
    # F(h_i, h_j, w, ij, e) = w * (h_j - h_i) + 0.1 * ij + e over every slot (pads included),
    # folded by sum, max or min.
    n, k, d = 6, 3, 2
    v, idx = random_ell(n, k, n, 0.0, "real")
    h = rng.uniform(-1, 1, size=(2, n, d))
    e = rng.uniform(-1, 1, size=(n, k, d))
    f = v[:, :, None] * (h[:, idx, :] - h[:, :, None, :]) + 0.1 * idx[:, :, None] + e
    for sr, red in (("real", np.sum), ("tropical_max_plus", np.max),
                    ("tropical_min_plus", np.min)):
        name = f"edge_{sr}"
        save(name, values=v, indices=idx, h=h, e=e, out=red(f, axis=2))
        lines.append(f"edge {name} {sr} {n} 0.0")


GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "golden", "sparse")


def golden_case(case, op, dtype, inputs, out, options, generator, seed=20261129, extra=()):
    """golden/sparse/<case>/: the fidelity runner's layout (docs/fidelity.md); extra: more
    `key = value` manifest lines."""
    d = os.path.join(GOLDEN, case)
    os.makedirs(d, exist_ok=True)
    for k, v in inputs.items():
        np.save(os.path.join(d, f"{k}.npy"), np.ascontiguousarray(v))
    np.save(os.path.join(d, "out.npy"), np.ascontiguousarray(out))
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write(f"op = {op}\ndtype = {dtype}\n")
        f.write("inputs = " + " ".join(f"{k}.npy" for k in inputs) + "\noutput = out.npy\n")
        f.write(f"options = {options}\ngenerator = {generator}\n")
        f.write(f"numpy = {np.__version__}\nscipy = {scipy.__version__}\nseed = {seed}\n")
        for line in extra:
            f.write(line + "\n")


def fd_reason(sr, ident):
    """The manifest's `fd = <why>` line for a case without a finite-difference gradient."""
    if sr == "boolean":
        return ["fd = BOOLEAN is forward-only (truth values have no derivative)"]
    if np.isinf(ident):
        return ["fd = the pads' values are infinite: a finite difference steps by inf"]
    return []


def golden_cases():
    g = np.random.RandomState(20261129)
    for sr in ALGEBRAS:
        for dt in (np.float64, np.float32):
            m, k, n_cols, c = 9, 5, 11, 4
            ident = IDENTITY[sr]
            v = g.uniform(-1.5, 1.5, size=(m, k))
            if sr == "boolean":
                v = (v > -0.5).astype(np.float64)
            idx = g.randint(0, n_cols, size=(m, k)).astype(np.int32)
            for i in range(m):
                deg = g.randint(0, k + 1)
                v[i, deg:] = ident
                idx[i, deg:] = 0
            b = g.uniform(-2, 2, size=(n_cols, c))
            v, b = v.astype(dt), b.astype(dt)
            out = ell_matmul_ref(sr, v.astype(np.float64), idx, b.astype(np.float64))
            name = np.dtype(dt).name
            golden_case(f"ell_matmul_{sr}_{name}", "semiring_ell_matmul", name,
                        {"values": v, "indices": idx, "b": b}, out.astype(dt),
                        f"semiring={sr.upper()} n_cols={n_cols}",
                        "numpy float64 brute force over each row's slots (gather, times, fold); "
                        "scipy.special.logsumexp for log", extra=fd_reason(sr, ident))
    for mode in ("nearest", "wrap", "reflect"):
        x = g.uniform(-1, 1, size=(4, 5, 6))
        golden_case(f"grid_laplacian_{mode}", "grid_laplacian", "float64", {"x": x},
                    scipy.ndimage.laplace(x, mode=mode), f"mode={mode}",
                    f"scipy.ndimage.laplace(x, mode='{mode}')")


TABLE_SEED = 20261202


def table_cases():
    """Cases of the table rows that had only tests/ops/sparse fixtures: semiring_ell_rmatvec,
    ell_row_softmax and the sectioned (CSR) matmul and rmatvec, f64 and f32, from their own seed
    so the cases above stay as they were. The oracles build the dense matrix A (duplicates of a
    column in a row add up) or fold each row's slots, in float64."""
    g = np.random.RandomState(TABLE_SEED)
    for dt in (np.float64, np.float32):
        name = np.dtype(dt).name
        # semiring_ell_rmatvec: Y = A^T X. Repeated indices in a row and across rows, so each
        # column collects terms from many slots (the drivers' contract runs on these); pads
        # (value 0 = identity, index 0) add nothing. X batched over a leading dim of 2.
        m, k, n_cols, c = 40, 6, 9, 3
        v = g.uniform(-1, 1, size=(m, k))
        idx = g.randint(0, n_cols, size=(m, k))
        # Pads only in the float32 case: the FD gradient test (float64) would step a pad off
        # the identity, which makes it a slot the vjp rightly gives no gradient.
        for i in range(m if dt == np.float32 else 0):
            deg = g.randint(0, k + 1) if i else k
            v[i, deg:] = 0.0
            idx[i, deg:] = 0
        x = g.uniform(-2, 2, size=(2, m, c))
        v, x = v.astype(dt), x.astype(dt)
        a = np.zeros((m, n_cols))
        for i in range(m):
            for p in range(k):
                a[i, idx[i, p]] += float(v[i, p])
        out = np.einsum("iq,bic->bqc", a, x.astype(np.float64))
        golden_case(f"ell_rmatvec_real_{name}", "semiring_ell_rmatvec", name,
                    {"values": v, "indices": idx.astype(np.int64), "x": x}, out.astype(dt),
                    f"semiring=REAL n_cols={n_cols}",
                    "numpy float64: the dense A (slots added into their columns), A^T @ X per "
                    "batch", TABLE_SEED)
        # ell_row_softmax: softmax of the scores over each row's non-pad slots. The float64 case
        # has no pads (its FD gradient test must not step a pad across the identity, which would
        # make it a slot); the float32 case has pads, a full row and an all-pad row.
        m, k = 7, 5
        v = g.uniform(0.5, 1.5, size=(m, k))
        idx = g.randint(0, 6, size=(m, k))
        if dt == np.float32:
            for i in range(m):
                deg = {0: k, 2: 0}.get(i, g.randint(1, k))
                v[i, deg:] = 0.0
                idx[i, deg:] = 0
        s = g.uniform(-3, 3, size=(2, m, k))
        v, s = v.astype(dt), s.astype(dt)
        keep = v != 0.0
        sd = s.astype(np.float64)
        out = np.zeros_like(sd)
        for b in range(2):
            for i in range(m):
                if keep[i].any():
                    e = np.exp(sd[b, i, keep[i]] - sd[b, i, keep[i]].max())
                    out[b, i, keep[i]] = e / e.sum()
        pads = "pads, a full row and an all-pad row" if dt == np.float32 else "no pads"
        golden_case(f"ell_row_softmax_{name}", "ell_row_softmax", name,
                    {"values": v, "indices": idx.astype(np.int32), "scores": s}, out.astype(dt),
                    "identity=0",
                    f"numpy float64: exp(s - max) / sum over each row's non-pad slots ({pads})",
                    TABLE_SEED)
        # sectioned_semiring_ell_matmul / _rmatvec on CSR rows: degrees 0..9 (an empty row, so
        # several sections), indices with repeats.
        n_rows, n_cols, c = 17, 8, 3
        deg = g.randint(0, 10, size=n_rows)
        deg[:3] = [0, 1, 9]
        offsets = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
        nnz = int(offsets[-1])
        ci = g.randint(0, n_cols, size=nnz).astype(np.int32)
        val = g.uniform(-1, 1, size=nnz).astype(dt)
        b = g.uniform(-1, 1, size=(n_cols, c)).astype(dt)
        x = g.uniform(-1, 1, size=(n_rows, c)).astype(dt)
        vd = val.astype(np.float64)
        # LOG and max-plus give -inf on the empty row, which the FD test's <dy, y> cannot take:
        # they are float32 cases.
        srs = ("real",) if dt == np.float64 else ("real", "log", "tropical_max_plus")
        for sr in srs:
            out = np.empty((n_rows, c))
            for i in range(n_rows):
                lo, hi = offsets[i], offsets[i + 1]
                t = times(sr, vd[lo:hi, None], b.astype(np.float64)[ci[lo:hi]])
                out[i] = fold(sr, t, 0) if hi > lo else IDENTITY[sr]
            golden_case(f"sectioned_ell_matmul_{sr}_{name}", "sectioned_semiring_ell_matmul",
                        name, {"offsets": offsets, "indices": ci, "values": val, "b": b},
                        out.astype(dt), f"semiring={sr.upper()} n_cols={n_cols}",
                        "numpy float64 brute force over each CSR row's entries (times, fold); "
                        "scipy.special.logsumexp for log", TABLE_SEED)
        a = np.zeros((n_rows, n_cols))
        for i in range(n_rows):
            for p in range(offsets[i], offsets[i + 1]):
                a[i, ci[p]] += vd[p]
        golden_case(f"sectioned_ell_rmatvec_real_{name}", "sectioned_semiring_ell_rmatvec", name,
                    {"offsets": offsets, "indices": ci, "values": val, "x": x},
                    np.einsum("iq,ic->qc", a, x.astype(np.float64)).astype(dt),
                    f"semiring=REAL n_cols={n_cols}",
                    "numpy float64: the dense A from the CSR rows, A^T @ X", TABLE_SEED)


def main():
    if not (np.__version__.startswith("1.24") and scipy.__version__.startswith("1.10")):
        sys.exit(f"need numpy 1.24 and scipy 1.10, found {np.__version__} {scipy.__version__}")
    os.makedirs(OUT, exist_ok=True)
    matmul_cases()
    rmatvec_cases()
    softmax_cases()
    from_dense_cases()
    laplace_cases()
    stencil_cases()
    sectioned_cases()
    edge_cases()
    golden_cases()
    table_cases()
    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write(f"# numpy {np.__version__} scipy {scipy.__version__}\n")
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
