#!/usr/bin/python3
"""Fixtures for tests/ops/sparse test-sparse-batch and the edge-aggregation CLI row.

Batched ELL values ([..., m, k_max] over one index matrix) against a dense operand with matching
or broadcast batch dims: forward results and the VJPs (dvalues, db / dx) of ELL matmul under
REAL, LOG and max-plus and of REAL rmatvec, written as float64 NumPy brute force over the slots
of each row (scipy.special.logsumexp for LOG); cotangents of broadcast operands are summed back
over the dims they were broadcast along. Also `nitrix run ell_edge_aggregate` cases: each
built-in edge function (message, diffusion, gaussian, relative) folded by sum/max/min.

Writes tests/ops/sparse/data/batch_*.npy and edgecli_*.npy, and golden/sparse/ cases for the
fidelity runner (batched ELL matmul, edge aggregation). Run from the repository root:

    /usr/bin/python3 tests/ops/sparse/gen-sparse-batch.py
"""
import os

import numpy as np
import scipy
import scipy.special

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
rng = np.random.RandomState(20261129 + 3)
VERSIONS = f"numpy {np.__version__}, scipy {scipy.__version__}"


def save(name, **arrays):
    for k, v in arrays.items():
        np.save(os.path.join(OUT, f"{name}_{k}.npy"), np.ascontiguousarray(v))


def reduce_to(x, shape):
    """Sum x over the leading dims it has beyond shape and over dims where shape has 1."""
    while x.ndim > len(shape):
        x = x.sum(axis=0)
    for ax, n in enumerate(shape):
        if n == 1 and x.shape[ax] != 1:
            x = x.sum(axis=ax, keepdims=True)
    return x


def scatter_rows(t, idx, n_rows):
    """out[..., q, j] = sum over (i, p) with idx[i, p] == q of t[..., i, p, j]."""
    out = np.zeros(t.shape[:-3] + (n_rows, t.shape[-1]))
    m, k = idx.shape
    for i in range(m):
        for p in range(k):
            out[..., idx[i, p], :] += t[..., i, p, :]
    return out


def matmul_fwd_vjp(sr, v, idx, b, dc):
    g = b[..., idx, :]                      # [..B, m, k, c]
    t = v[..., :, :, None] + g if sr != "real" else v[..., :, :, None] * g
    if sr == "real":
        out = t.sum(axis=-2)
        dt = dc[..., :, None, :] * np.ones_like(t)
        dv_full = (dt * g).sum(axis=-1)
        dg = dt * v[..., :, :, None]
    elif sr == "log":
        out = scipy.special.logsumexp(t, axis=-2)
        w = np.exp(t - out[..., :, None, :])
        dt = dc[..., :, None, :] * w
        dv_full = dt.sum(axis=-1)
        dg = dt
    else:  # tropical_max_plus: the winner of each (i, j) takes the cotangent
        out = t.max(axis=-2)
        win = (t == out[..., :, None, :]).astype(np.float64)
        assert (win.sum(axis=-2) == 1).all(), "a tie: reseed"
        dt = dc[..., :, None, :] * win
        dv_full = dt.sum(axis=-1)
        dg = dt
    dv = reduce_to(dv_full, v.shape)
    db = reduce_to(scatter_rows(dg, idx, b.shape[-2]), b.shape)
    return out, dv, db


def rmatvec_fwd_vjp(v, idx, x, dy, n_cols, identity):
    vm = np.where(v == identity, 0.0, v)           # pads contribute nothing
    upd = vm[..., :, :, None] * x[..., :, None, :]  # [..B, m, k, c]
    out = scatter_rows(upd, idx, n_cols)
    dyg = dy[..., idx, :]                           # [..B, m, k, c]
    dv = reduce_to(np.where(v[..., None] == identity, 0.0, dyg * x[..., :, None, :]).sum(-1),
                   v.shape)
    dx = reduce_to((vm[..., :, :, None] * dyg).sum(axis=-2), x.shape)
    return out, dv, dx


def ell(m, k, n_cols, identity, batch):
    v = rng.uniform(-1.5, 1.5, size=batch + (m, k))
    idx = rng.randint(0, n_cols, size=(m, k))
    for i in range(m):
        d = rng.randint(1, k + 1)                   # at least one real slot per row
        idx[i, d:] = 0
        v[..., i, d:] = identity
    return v, idx


def batch_cases():
    m, k, n, c = 5, 3, 4, 2
    cases = [
        # name, algebra, values' batch, b's batch
        ("mm_real", "real", (2,), ()),
        ("mm_real_both", "real", (2,), (2,)),
        ("mm_log", "log", (2, 1), (3,)),
        ("mm_max", "tropical_max_plus", (3,), (1,)),
    ]
    for name, sr, vb, bb in cases:
        ident = 0.0 if sr == "real" else -np.inf
        v, idx = ell(m, k, n, ident, vb)
        b = rng.uniform(-2, 2, size=bb + (n, c))
        outshape = np.broadcast_shapes(vb, bb) + (m, c)
        dc = rng.uniform(-1, 1, size=outshape)
        out, dv, db = matmul_fwd_vjp(sr, v, idx, b, dc)
        save(f"batch_{name}", values=v, indices=idx, b=b, out=out, dc=dc, dvalues=dv, db=db)
    for name, vb, xb in (("rmv", (2,), ()), ("rmv_both", (1, 2), (3, 1))):
        v, idx = ell(m, k, n, 0.0, vb)
        x = rng.uniform(-2, 2, size=xb + (m, c))
        outshape = np.broadcast_shapes(vb, xb) + (n, c)
        dy = rng.uniform(-1, 1, size=outshape)
        out, dv, dx = rmatvec_fwd_vjp(v, idx, x, dy, n, 0.0)
        save(f"batch_{name}", values=v, indices=idx, x=x, out=out, dc=dy, dvalues=dv, db=dx)


def softmax_edge_batch_cases():
    """Row softmax and edge aggregation with batched values (pads that differ per batch)."""
    m, k, d = 5, 3, 2
    v, idx = ell(m, k, m, 0.0, (2,))
    v[1, 0, :] = 0.0                                # an all-pad row in batch 1 only
    scores = rng.uniform(-2, 2, size=(2, m, k))
    pad = v == 0.0
    e = np.where(pad, 0.0, np.exp(scores - np.where(pad, -np.inf, scores).max(-1, keepdims=True)))
    tot = e.sum(-1, keepdims=True)
    save("batch_smax", values=v, indices=idx, x=scores,
         out=np.where(tot == 0, 0.0, e / np.where(tot == 0, 1.0, tot)))
    h = rng.uniform(-1, 1, size=(m, d))
    f = v[..., None] * (h[idx] - h[:, None, :])     # w * (hj - hi), [2, m, k, d]
    save("batch_edge", values=v, indices=idx, h=h, out=f.sum(axis=2))


EDGE_FNS = {
    "message": lambda hi, hj, w: w * hj,
    "diffusion": lambda hi, hj, w: w * (hj - hi),
    "gaussian": lambda hi, hj, w: w * np.exp(-((hi - hj) ** 2).sum(-1, keepdims=True)),
    "relative": lambda hi, hj, w: hj - hi,
}


def edge_cli_cases():
    n, k, d = 6, 3, 2
    for fn, sr, red in (("message", "real", np.sum), ("diffusion", "real", np.sum),
                        ("gaussian", "tropical_max_plus", np.max),
                        ("relative", "tropical_min_plus", np.min)):
        v = rng.uniform(0.1, 1.5, size=(n, k))
        idx = rng.randint(0, n, size=(n, k)).astype(np.int32)
        h = rng.uniform(-1, 1, size=(n, d))
        f = EDGE_FNS[fn](h[:, None, :], h[idx], v[:, :, None])
        save(f"edgecli_{fn}", values=v, indices=idx, h=h, out=red(f, axis=1))


GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "golden",
                      "sparse")


def golden_case(case, op, dtype, inputs, out, options, generator, extra=()):
    """golden/sparse/<case>/: the fidelity runner's layout (docs/fidelity.md)."""
    d = os.path.join(GOLDEN, case)
    os.makedirs(d, exist_ok=True)
    for k, v in inputs.items():
        np.save(os.path.join(d, f"{k}.npy"), np.ascontiguousarray(v))
    np.save(os.path.join(d, "out.npy"), np.ascontiguousarray(out))
    with open(os.path.join(d, "manifest.txt"), "w") as f:
        f.write(f"op = {op}\ndtype = {dtype}\n")
        f.write("inputs = " + " ".join(f"{k}.npy" for k in inputs) + "\noutput = out.npy\n")
        f.write(f"options = {options}\ngenerator = {generator}\n")
        f.write(f"numpy = {np.__version__}\nscipy = {scipy.__version__}\nseed = 20261132\n")
        for line in extra:
            f.write(line + "\n")


def golden_cases():
    g = np.random.RandomState(20261132)
    m, k, n, c = 9, 5, 11, 4
    for sr, vb, bb, dt in (("real", (2,), (), np.float64), ("log", (2, 1), (3,), np.float32),
                           ("tropical_max_plus", (3,), (3,), np.float64)):
        ident = 0.0 if sr == "real" else -np.inf
        v = g.uniform(-1.5, 1.5, size=vb + (m, k))
        idx = g.randint(0, n, size=(m, k)).astype(np.int32)
        for i in range(m):
            deg = g.randint(1, k + 1)
            v[..., i, deg:] = ident
            idx[i, deg:] = 0
        b = g.uniform(-2, 2, size=bb + (n, c))
        v, b = v.astype(dt), b.astype(dt)
        out, _, _ = matmul_fwd_vjp(sr, v.astype(np.float64), idx, b.astype(np.float64),
                                   np.zeros(np.broadcast_shapes(vb, bb) + (m, c)))
        name = np.dtype(dt).name
        golden_case(f"ell_matmul_batch_{sr}_{name}", "semiring_ell_matmul", name,
                    {"values": v, "indices": idx, "b": b}, out.astype(dt),
                    f"semiring={sr.upper()} n_cols={n}",
                    "numpy float64 brute force over each row's slots, values and b batched "
                    "(broadcast); scipy.special.logsumexp for log",
                    ["fd = the pads' values are -inf: a finite difference steps by inf"]
                    if ident == -np.inf else [])
    for fn, sr, red, dt in (("diffusion", "real", np.sum, np.float64),
                            ("gaussian", "tropical_max_plus", np.max, np.float64),
                            ("relative", "tropical_min_plus", np.min, np.float32)):
        v = g.uniform(0.1, 1.5, size=(m, k))
        idx = g.randint(0, m, size=(m, k)).astype(np.int32)
        h = g.uniform(-1, 1, size=(2, m, 3))
        f = EDGE_FNS[fn](h[:, :, None, :], h[:, idx], v[:, :, None])
        v, h = v.astype(dt), h.astype(dt)
        name = np.dtype(dt).name
        golden_case(f"ell_edge_aggregate_{fn}_{name}", "semiring_ell_edge_aggregate", name,
                    {"values": v, "indices": idx, "h": h}, red(f, axis=2).astype(dt),
                    f"semiring={sr.upper()} edge={fn}",
                    "numpy float64: the edge function over (h_i, gathered h_j, w) per slot, "
                    "folded by sum/max/min over the slots")


def main():
    batch_cases()
    edge_cli_cases()
    golden_cases()
    softmax_edge_batch_cases()
    with open(os.path.join(OUT, "batch-versions.txt"), "w") as f:
        f.write(f"gen-sparse-batch.py: {VERSIONS}\n")


if __name__ == "__main__":
    main()
