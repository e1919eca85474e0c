"""Matrix utilities: symmetric, sym2vec, vec2sym, squareform, delete_diagonal, fill_diagonal,
toeplitz, toeplitz_2d, against NumPy index formulas, scipy.spatial.distance.squareform and
scipy.linalg.toeplitz (exact: these ops move values, one rounding at most for symmetric)."""
import numpy as np
import scipy.linalg as sl
from scipy.spatial.distance import squareform as sq

PREFIX = "lam_"


def vec2sym_np(v, offset):
    n = v.shape[-1]
    side = int(0.5 * (np.sqrt(8 * n + 1) + 1)) + offset - 1
    iu = np.triu_indices(side, offset)
    s = np.zeros(v.shape[:-1] + (side, side), v.dtype)
    s[..., iu[0], iu[1]] = v
    return np.where(np.eye(side, dtype=bool), s, s + np.swapaxes(s, -1, -2))


def cases(rng):
    for dt in (np.float64, np.float32):
        t = np.dtype(dt).name
        x = rng.standard_normal((2, 3, 4, 4)).astype(dt)
        for skew in (False, True):
            want = (x.astype(np.float64) + (-1 if skew else 1) * np.swapaxes(x, -1, -2)) / 2
            yield dict(op="symmetric", dtype=dt, name=f"lam_symmetric{'_skew' if skew else ''}_{t}",
                       inputs=[("X.npy", x)], outputs=[("Y.npy", want.astype(dt))],
                       options=[("skew", "true")] if skew else [],
                       generator="numpy (X +- swapaxes(X, -1, -2)) / 2")
        y = rng.standard_normal((3, 2, 3)).astype(dt)
        want = (y.astype(np.float64) + np.swapaxes(y, 0, 2)) / 2
        yield dict(op="symmetric", dtype=dt, name=f"lam_symmetric_axes_{t}",
                   inputs=[("X.npy", y)], outputs=[("Y.npy", want.astype(dt))],
                   options=[("axes", "0,2")], generator="numpy (X + swapaxes(X, 0, 2)) / 2")
        s = rng.standard_normal((2, 5, 5)).astype(dt)
        for off in (1, 0, 2):
            iu = np.triu_indices(5, off)
            yield dict(op="sym2vec", dtype=dt, name=f"lam_sym2vec_off{off}_{t}",
                       inputs=[("sym.npy", s)], outputs=[("vec.npy", s[..., iu[0], iu[1]])],
                       options=[("offset", str(off))], generator="numpy sym[..., triu_indices]")
            v = rng.standard_normal((3, len(iu[0]))).astype(dt)
            yield dict(op="vec2sym", dtype=dt, name=f"lam_vec2sym_off{off}_{t}",
                       inputs=[("vec.npy", v)], outputs=[("sym.npy", vec2sym_np(v, off))],
                       options=[("offset", str(off))],
                       generator="numpy: triu_indices fill, mirrored off the main diagonal")
        v = rng.standard_normal((2, 10)).astype(dt)
        yield dict(op="squareform", dtype=dt, name=f"lam_squareform_vec_{t}",
                   inputs=[("X.npy", v)],
                   outputs=[("Y.npy", np.stack([sq(r, checks=False) for r in v]))],
                   generator="scipy.spatial.distance.squareform per vector")
        m = np.stack([sq(r, checks=False) for r in v])
        yield dict(op="squareform", dtype=dt, name=f"lam_squareform_mat_{t}",
                   inputs=[("X.npy", m)],
                   outputs=[("Y.npy", np.stack([sq(r, checks=False) for r in m]))],
                   generator="scipy.spatial.distance.squareform per matrix")
        a = rng.standard_normal((3, 4, 4)).astype(dt)
        yield dict(op="delete_diagonal", dtype=dt, name=f"lam_delete_diagonal_{t}",
                   inputs=[("A.npy", a)], outputs=[("Y.npy", a * ~np.eye(4, dtype=bool))],
                   generator="numpy A * ~eye")
        b = rng.standard_normal((2, 4, 6)).astype(dt)
        for fill, off in ((0.0, 0), (2.5, 2), (-1.0, -1)):
            w = b.copy()
            for i in range(4):
                if 0 <= i + off < 6:
                    w[..., i, i + off] = fill
            opts = [("fill", repr(fill)), ("offset", str(off))] if off or fill else []
            yield dict(op="fill_diagonal", dtype=dt, name=f"lam_fill_diagonal_{off}_{t}",
                       inputs=[("A.npy", b)], outputs=[("Y.npy", w)], options=opts,
                       generator="numpy cell loop A[..., i, i + offset] = fill")
        c = rng.standard_normal(5).astype(dt)
        r = rng.standard_normal(4).astype(dt)
        yield dict(op="toeplitz_2d", dtype=dt, name=f"lam_toeplitz_2d_{t}",
                   inputs=[("c.npy", c), ("r.npy", r)], outputs=[("T.npy", sl.toeplitz(c, r))],
                   generator="scipy.linalg.toeplitz(c, r)")
        yield dict(op="toeplitz_2d", dtype=dt, name=f"lam_toeplitz_2d_sym_{t}",
                   inputs=[("c.npy", c)], outputs=[("T.npy", sl.toeplitz(c))],
                   generator="scipy.linalg.toeplitz(c)")
        big = np.full((7, 6), -3.0)
        big[:5, :4] = 0
        full = sl.toeplitz(np.r_[c, np.full(2, -3.0)], np.r_[r, np.full(2, -3.0)]).astype(dt)
        yield dict(op="toeplitz_2d", dtype=dt, name=f"lam_toeplitz_2d_shape_fill_{t}",
                   inputs=[("c.npy", c), ("r.npy", r)], outputs=[("T.npy", full)],
                   options=[("shape", "7,6"), ("fill_value", "-3.0")],
                   generator="scipy.linalg.toeplitz of c and r extended with fill_value")
        cb = rng.standard_normal((2, 3, 4)).astype(dt)
        rb = rng.standard_normal((2, 3, 5)).astype(dt)
        want = np.stack([sl.toeplitz(cb[i, j], rb[i, j]) for i in range(2) for j in range(3)])
        yield dict(op="toeplitz", dtype=dt, name=f"lam_toeplitz_batch_{t}",
                   inputs=[("c.npy", cb), ("r.npy", rb)],
                   outputs=[("T.npy", want.reshape(2, 3, 4, 5))],
                   generator="scipy.linalg.toeplitz per (c, r) pair")
