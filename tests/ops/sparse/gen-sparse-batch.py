#!/usr/bin/python3
"""Fixtures for tests/ops/sparse test-sparse-batch and the edge-aggregation CLI row.

Batched ELL values ([..., m, k_max] over one index matrix) against a dense operand with matching
or broadcast batch dims: forward results and the VJPs (dvalues, db / dx) of ELL matmul under
REAL, LOG and max-plus and of REAL rmatvec, written as float64 NumPy brute force over the slots
of each row (scipy.special.logsumexp for LOG); cotangents of broadcast operands are summed back
over the dims they were broadcast along. Also `nitrix run ell_edge_aggregate` cases: each
built-in edge function (message, diffusion, gaussian, relative) folded by sum/max/min.

Writes tests/ops/sparse/data/batch_*.npy and edgecli_*.npy. Run from the repository root:

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


def main():
    batch_cases()
    edge_cli_cases()
    with open(os.path.join(OUT, "batch-versions.txt"), "w") as f:
        f.write(f"gen-sparse-batch.py: {VERSIONS}\n")


if __name__ == "__main__":
    main()
