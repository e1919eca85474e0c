"""The batched small-dense tier: cholesky, triangular_solve, cho_solve, solve, inv_logdet, eigh,
against numpy.linalg / scipy.linalg in float64 (looped per problem where scipy is not batched).
Matrices are well conditioned (SPD: X X^T / p + I; general: I + 0.3 N(0, 1)), so the float32
cases keep the descriptors' tolerances. Failing problems (non-SPD, singular) are NaN by the ops'
documented rule: a case with one bad problem among good ones checks that only that one is NaN.
eigh: numpy's eigenvectors are sign-normalised as the op's are (each column's entry of largest
magnitude positive); spectra are well separated so the vectors are unique."""
import numpy as np
import scipy.linalg as sl

PREFIX = "la_"


def spd(rng, batch, p):
    x = rng.standard_normal(batch + (p, p + 2))
    return x @ np.swapaxes(x, -1, -2) / p + np.eye(p)


def general(rng, batch, p):
    return np.eye(p) + 0.3 * rng.standard_normal(batch + (p, p))


def loop(f, a, *rest):
    """f applied to each problem of a batch (scipy's routines take one matrix)."""
    batch = a.shape[:-2]
    out = [f(a[i], *(r[i] for r in rest)) for i in np.ndindex(*batch)]
    return np.array(out).reshape(batch + np.shape(out[0]))


def upper_garbage(rng, a):
    """a with noise above the diagonal: the ops read the lower triangle only."""
    return a + np.triu(rng.standard_normal(a.shape), 1)


def eigh_normalised(a):
    w, v = np.linalg.eigh(a)
    idx = np.argmax(np.abs(v), axis=-2)
    s = np.sign(np.take_along_axis(v, idx[..., None, :], axis=-2))
    return w, v * s


def cases(rng):
    f64, f32 = np.float64, np.float32
    # --- cholesky --------------------------------------------------------------------------
    for dt in (f64, f32):
        t = np.dtype(dt).name
        for batch, p in (((3, 2), 5), ((), 3), ((4,), 1), ((2,), 8)):
            a = spd(rng, batch, p).astype(dt)
            aa = upper_garbage(rng, a.astype(f64)).astype(dt) if p > 1 else a
            L = np.linalg.cholesky(a.astype(f64))
            shape = "x".join(map(str, batch + (p, p)))
            yield dict(op="cholesky", dtype=dt, name=f"la_cholesky_{shape}_{t}",
                       inputs=[("a.npy", aa)],
                       outputs=[("L.npy", L.astype(dt)),
                                ("info.npy", np.zeros(batch, np.int32))],
                       generator="numpy.linalg.cholesky float64 of the lower triangle")
    a = spd(rng, (4,), 4)
    a[1, 2, 2] = -5.0  # leading minor of order 3 not positive
    a[3, 0, 0] = -1.0  # order 1
    L = np.linalg.cholesky(a[[0, 2]])
    want = np.full(a.shape, np.nan)
    want[[0, 2]] = L
    yield dict(op="cholesky", dtype=f64, name="la_cholesky_zz_nonspd_float64",
               inputs=[("a.npy", a)],
               outputs=[("L.npy", want), ("info.npy", np.array([0, 3, 0, 1], np.int32))],
               generator="numpy.linalg.cholesky float64 of the SPD problems; the op's rule: "
               "non-SPD problems all NaN, info = first non-positive leading minor (LAPACK)",
               fd="NaN outputs of the non-SPD problems")
    # --- triangular_solve ------------------------------------------------------------------
    for dt in (f64, f32):
        t = np.dtype(dt).name
        for lower, trans, unit, vec in ((True, "N", False, False), (False, "T", False, True),
                                        (True, "T", True, False), (False, "N", False, False)):
            p = 5
            base = np.tril(general(rng, (3,), p)) if lower else np.triu(general(rng, (3,), p))
            noise = (np.triu if lower else np.tril)(rng.standard_normal((3, p, p)), 1)
            a = base + noise  # the other triangle is not read
            b = rng.standard_normal((3, p) if vec else (3, p, 2))
            a, b = a.astype(dt), b.astype(dt)
            x = loop(lambda m, r: sl.solve_triangular(m, r, trans=trans, lower=lower,
                                                      unit_diagonal=unit),
                     a.astype(f64), b.astype(f64))
            nm = f"la_trsolve_{'lo' if lower else 'up'}_{trans}{'_unit' if unit else ''}" \
                 f"{'_vec' if vec else ''}_{t}"
            yield dict(op="triangular_solve", dtype=dt, name=nm,
                       inputs=[("a.npy", a), ("b.npy", b)], outputs=[("x.npy", x.astype(dt))],
                       options=[("lower", "true" if lower else "false"), ("trans", trans),
                                ("unit_diagonal", "true" if unit else "false")],
                       generator="scipy.linalg.solve_triangular float64 per problem")
    a = np.tril(general(rng, (3,), 3))
    a[1, 2, 2] = 0.0
    b = rng.standard_normal((3, 3))
    x = loop(lambda m, r: sl.solve_triangular(m, r, lower=True), a[[0, 2]], b[[0, 2]])
    want = np.full(b.shape, np.nan)
    want[[0, 2]] = x
    yield dict(op="triangular_solve", dtype=f64, name="la_trsolve_zz_singular_float64",
               inputs=[("a.npy", a), ("b.npy", b)], outputs=[("x.npy", want)],
               options=[("lower", "true")],
               generator="scipy.linalg.solve_triangular float64 of the regular problems; the "
               "op's rule: a zero diagonal gives an all-NaN x", fd="NaN output")
    # --- cho_solve ---------------------------------------------------------------------------
    for dt in (f64, f32):
        t = np.dtype(dt).name
        for batch, p, k, l2 in (((2, 3), 6, 0, 0.0), ((4,), 3, 2, 0.5), ((), 1, 0, 0.0)):
            a = spd(rng, batch, p)
            b = rng.standard_normal(batch + ((p,) if k == 0 else (p, k)))
            am = a + l2 * np.eye(p)
            x = np.linalg.solve(am, b if k else b[..., None])
            x = x if k else x[..., 0]
            aa = upper_garbage(rng, a) if p > 1 else a
            opts = [("l2", repr(l2))] if l2 else []
            yield dict(op="cho_solve", dtype=dt,
                       name=f"la_cho_solve_{'z_' if p == 1 else ''}p{p}_k{k}"
                       f"{'_l2' if l2 else ''}_{t}",
                       inputs=[("a.npy", aa.astype(dt)), ("b.npy", b.astype(dt))],
                       outputs=[("x.npy", x.astype(dt))], options=opts,
                       generator="numpy.linalg.solve float64 of (a + l2 I) (lower triangle of a)")
    a = spd(rng, (3,), 4)
    a[0] = -a[0]
    b = rng.standard_normal((3, 4))
    want = np.full(b.shape, np.nan)
    want[1:] = np.linalg.solve(a[1:], b[1:, :, None])[..., 0]
    yield dict(op="cho_solve", dtype=f64, name="la_cho_solve_zz_nonspd_float64",
               inputs=[("a.npy", a), ("b.npy", b)], outputs=[("x.npy", want)],
               generator="numpy.linalg.solve float64 of the SPD problems; the op's rule: a "
               "non-SPD problem's x is all NaN", fd="NaN output")
    # --- solve -------------------------------------------------------------------------------
    for dt in (f64, f32):
        t = np.dtype(dt).name
        for batch, p, k in (((3, 2), 4, 0), ((5,), 6, 3), ((), 1, 0), ((2,), 8, 1)):
            a = general(rng, batch, p)
            if p > 1:
                # small diagonal entries make the pivoting choose other rows
                a[..., 0, 0] = 0.01 * a[..., 0, 0]
            b = rng.standard_normal(batch + ((p,) if k == 0 else (p, k)))
            x = np.linalg.solve(a, b if k else b[..., None])
            x = x if k else x[..., 0]
            yield dict(op="solve", dtype=dt, name=f"la_solve_{'z_' if p == 1 else ''}p{p}_k{k}_{t}",
                       inputs=[("a.npy", a.astype(dt)), ("b.npy", b.astype(dt))],
                       outputs=[("x.npy", x.astype(dt))],
                       generator="numpy.linalg.solve float64")
    a = general(rng, (3,), 3)
    a[2, :, 1] = 2 * a[2, :, 0]  # exactly singular: column 1 = 2 column 0
    a[2, :, 0] = [1.0, 0.5, 0.25]
    a[2, :, 1] = [2.0, 1.0, 0.5]
    b = rng.standard_normal((3, 3))
    want = np.full(b.shape, np.nan)
    want[:2] = np.linalg.solve(a[:2], b[:2, :, None])[..., 0]
    yield dict(op="solve", dtype=f64, name="la_solve_zz_singular_float64",
               inputs=[("a.npy", a), ("b.npy", b)], outputs=[("x.npy", want)],
               generator="numpy.linalg.solve float64 of the regular problems; the op's rule: an "
               "exact zero pivot (numpy: LinAlgError) gives an all-NaN x", fd="NaN output")
    # --- inv_logdet --------------------------------------------------------------------------
    for dt in (f64, f32):
        t = np.dtype(dt).name
        for batch, p in (((3,), 4), ((2, 2), 2), ((3,), 1), ((), 6)):
            a = spd(rng, batch, p)
            inv = np.linalg.inv(a)
            sign, logdet = np.linalg.slogdet(a)
            assert (sign > 0).all()
            aa = upper_garbage(rng, a) if p > 2 else a
            yield dict(op="inv_logdet", dtype=dt,
                       name=f"la_inv_logdet_{'z_' if p == 1 else ''}p{p}_{t}",
                       inputs=[("a.npy", aa.astype(dt))],
                       outputs=[("inv.npy", inv.astype(dt)),
                                ("logdet.npy", np.asarray(logdet).astype(dt))],
                       generator="numpy.linalg.inv and slogdet float64"
                       + (" (lower triangle of a)" if p > 2 else ""))
    a = spd(rng, (3,), 3)
    a[1] = -a[1]
    want_inv = np.full(a.shape, np.nan)
    want_ld = np.full(3, np.nan)
    idx = [0, 2]
    want_inv[idx] = np.linalg.inv(a[idx])
    want_ld[idx] = np.linalg.slogdet(a[idx])[1]
    yield dict(op="inv_logdet", dtype=f64, name="la_inv_logdet_zz_nonspd_float64",
               inputs=[("a.npy", a)], outputs=[("inv.npy", want_inv), ("logdet.npy", want_ld)],
               generator="numpy.linalg.inv/slogdet float64 of the SPD problems; the op's rule: "
               "non-SPD problems all NaN", fd="NaN outputs")
    # --- eigh --------------------------------------------------------------------------------
    for dt in (f64, f32):
        t = np.dtype(dt).name
        for batch, p in (((3,), 4), ((2, 2), 6), ((2,), 1), ((), 3)):
            if dt == f32 and p == 6:
                continue
            q, _ = np.linalg.qr(rng.standard_normal(batch + (p, p)))
            w = np.sort(rng.uniform(-2, 2, batch + (p,)), axis=-1)
            # well separated: spacing at least 0.2
            w = w + 0.2 * np.arange(p) - 0.1 * p
            a = (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)
            a = (a + np.swapaxes(a, -1, -2)) / 2
            wo, vo = eigh_normalised(a)
            aa = upper_garbage(rng, a) if p > 1 else a
            yield dict(op="eigh", dtype=dt, name=f"la_eigh_{'z_' if p == 1 else ''}p{p}_{t}",
                       inputs=[("a.npy", aa.astype(dt))],
                       outputs=[("w.npy", wo.astype(dt)), ("v.npy", vo.astype(dt))],
                       generator="numpy.linalg.eigh float64 (UPLO=L), columns signed so that "
                       "the entry of largest magnitude is positive")
