"""Similarity metrics: ncc, lncc, lncc_grad, lncc_grad_center, correlation_ratio, in float64
NumPy/SciPy, never with nitrix.

- ncc: numpy.corrcoef (numpy.cov with aweights for a weighted mask) with eps=0; one case at the
  default eps from the documented formula, checked against corrcoef here.
- lncc: the ANTs formula over box sums from scipy.ndimage.uniform_filter (times the window size),
  scipy's border modes (cval 0 for constant).
- lncc_grad: the exact gradient of sum(lncc) with respect to moving, the transposed box sums
  applied as explicit matrices (column j of an axis's matrix is the box sum of the unit vector
  e_j by uniform_filter1d, and the transpose is that matrix's transpose); checked here against
  central differences of the NumPy lncc.
- lncc_grad_center: ITK's centre-only formula (ANTSNeighborhoodCorrelation) over uniform_filter.
- correlation_ratio: eta^2 with the linear soft binning written as lower bin and fraction
  (floor, clip) and numpy.add.at, the weighted means and variances in float64.
"""
import numpy as np
import scipy.ndimage as ndi

PREFIX = "sim_"


def _spatial(a, spatial_rank):
    nsp = spatial_rank if spatial_rank else min(a.ndim, 3)
    return list(range(a.ndim - nsp, a.ndim))


def _radii(radius, axes):
    r = list(radius) if isinstance(radius, (list, tuple)) else [radius]
    return r * len(axes) if len(r) == 1 else r


def box(a, radius, mode, spatial_rank=0):
    axes = _spatial(a, spatial_rank)
    r = _radii(radius, axes)
    out = a
    for ax, ri in zip(axes, r):
        k = 2 * ri + 1
        out = ndi.uniform_filter1d(out, k, axis=ax, mode=mode, cval=0.0) * k
    return out


def box_t(z, shape, radius, mode, spatial_rank=0):
    """The transpose of box: per axis, the explicit matrix of the 1-D box sum, transposed."""
    axes = _spatial(z, spatial_rank)
    r = _radii(radius, axes)
    out = z
    for ax, ri in zip(axes, r):
        n, k = shape[ax], 2 * ri + 1
        mat = np.stack([ndi.uniform_filter1d(np.eye(n)[j], k, mode=mode, cval=0.0) * k
                        for j in range(n)], axis=1)  # mat[i, j] = d B(x)[i] / d x[j]
        out = np.moveaxis(np.tensordot(mat.T, np.moveaxis(out, ax, 0), axes=1), 0, ax)
    return out


def lncc_terms(m, f, radius, mode, eps, spatial_rank=0):
    axes = _spatial(m, spatial_rank)
    n = float(np.prod([2 * ri + 1 for ri in _radii(radius, axes)]))
    B = lambda a: box(a, radius, mode, spatial_rank)
    sm, sf, smm, sff, smf = B(m), B(f), B(m * m), B(f * f), B(m * f)
    cross = smf - sm * sf / n
    var_m = smm - sm * sm / n
    var_f = sff - sf * sf / n
    return dict(n=n, sm=sm, sf=sf, cross=cross, var_m=var_m, var_f=var_f,
                cc=cross * cross / (var_m * var_f + eps))


def lncc_grad(m, f, radius, mode, eps, spatial_rank=0):
    t = lncc_terms(m, f, radius, mode, eps, spatial_rank)
    d = t["var_m"] * t["var_f"] + eps
    p = 2 * t["cross"] / d
    q = -2 * t["cross"] ** 2 * t["var_f"] / d ** 2
    BT = lambda z: box_t(z, m.shape, radius, mode, spatial_rank)
    mbar, fbar = t["sm"] / t["n"], t["sf"] / t["n"]
    return f * BT(p) - BT(p * fbar) + m * BT(q) - BT(q * mbar)


def check_lncc_grad(rng, m, f, radius, mode, eps, spatial_rank=0):
    """Central differences of sum(lncc) at a few coordinates against the closed form."""
    g = lncc_grad(m, f, radius, mode, eps, spatial_rank)
    for _ in range(6):
        i = tuple(rng.randint(0, s) for s in m.shape)
        h = 1e-6
        mp, mm_ = m.copy(), m.copy()
        mp[i] += h
        mm_[i] -= h
        fd = (lncc_terms(mp, f, radius, mode, eps, spatial_rank)["cc"].sum() -
              lncc_terms(mm_, f, radius, mode, eps, spatial_rank)["cc"].sum()) / (2 * h)
        assert abs(fd - g[i]) <= 1e-6 * max(1.0, abs(g).max()), (mode, radius, fd, g[i])
    return g


def lncc_grad_center(m, f, radius, mode, eps, spatial_rank=0):
    t = lncc_terms(m, f, radius, mode, eps, spatial_rank)
    s_fm, s_mm, s_ff = t["cross"], t["var_m"], t["var_f"]
    f_a = f - t["sf"] / t["n"]
    m_a = m - t["sm"] / t["n"]
    safe = (s_ff > eps) & (s_mm > eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = 2 * s_fm / (s_ff * s_mm) * (f_a - s_fm / s_mm * m_a)
    return np.where(safe, g, 0.0)


def pair(rng, shape, dt, scale=1.0):
    """A moving image and a fixed one locally related to it (so cc spans [0, 1])."""
    m = rng.uniform(0, 1, size=shape)
    f = np.sin(3 * m) * scale + 0.3 * rng.standard_normal(shape)
    return m.astype(dt), f.astype(dt)


def opts_text(radius):
    return ",".join(map(str, radius)) if isinstance(radius, (list, tuple)) else str(radius)


def lncc_cases(rng):
    # (tag, shape, radius, mode, spatial_rank, reduction, mask kind)
    specs = [
        ("1_mask_mean", (6, 5, 7), 2, "reflect", 0, "mean", "weights"),
        ("2_wrap_batch", (2, 6, 7), [1, 2], "wrap", 2, "none", None),
        ("default", (12, 11, 10), None, None, 0, None, None),
        ("mirror", (8, 9, 10), 2, "mirror", 0, None, None),
        ("nearest", (8, 9, 10), 2, "nearest", 0, None, None),
        ("constant", (8, 9, 10), 2, "constant", 0, None, None),
        ("peraxis_sum", (8, 9, 10), [1, 2, 3], "reflect", 0, "sum", None),
        ("wide_reflect", (4, 6, 3), 5, "reflect", 0, None, None),
        ("wide_mirror", (4, 6, 3), 5, "mirror", 0, None, None),
        ("wide_wrap", (4, 6, 3), 5, "wrap", 0, None, None),
        ("wide_nearest", (4, 6, 3), 5, "nearest", 0, None, None),
        ("twod_boolmask", (13, 11), 3, "reflect", 0, "mean", "bool"),
    ]
    for dt in (np.float32, np.float64):
        t = np.dtype(dt).name
        for tag, shape, radius, mode, srank, red, mk in specs:
            m, f = pair(rng, shape, dt)
            r = 4 if radius is None else radius
            md = "reflect" if mode is None else mode
            cc = lncc_terms(m.astype(np.float64), f.astype(np.float64), r, md, 1e-5, srank)["cc"]
            options = []
            if radius is not None:
                options.append(("radius", opts_text(radius)))
            if mode is not None:
                options.append(("mode", mode))
            if srank:
                options.append(("spatial_rank", str(srank)))
            inputs = [("moving.npy", m), ("fixed.npy", f)]
            w = None
            if mk == "weights":
                w = rng.uniform(0.1, 1.0, size=shape).astype(dt)
            elif mk == "bool":
                w = rng.uniform(size=shape) > 0.3
            if w is not None:
                inputs.append(("mask.npy", w))
            wf = np.ones(shape) if w is None else w.astype(np.float64)
            if red:
                options.append(("reduction", red))
            if red == "sum":
                y = (wf * cc).sum()
            elif red == "mean":
                y = (wf * cc).sum() / wf.sum()
            else:
                y = wf * cc if w is not None else cc
            yield dict(name=f"sim_lncc_{tag}_{t}", op="lncc", dtype=dt, inputs=inputs,
                       outputs=[("out.npy", np.array(y, dtype=dt))], options=options,
                       generator="numpy float64 ANTs lncc over scipy.ndimage.uniform_filter1d "
                                 "box sums (x window size), scipy's border mode")
    # a constant image: var = 0 gives 0 / eps, documented as 0 (scipy: the same formula)
    m = np.full((5, 6, 4), 0.75)
    _, f = pair(rng, (5, 6, 4), np.float64)
    cc = lncc_terms(m, f, 1, "reflect", 1e-5)["cc"]
    assert np.abs(cc).max() < 1e-12
    yield dict(name="sim_lncc_constant_image_float64", op="lncc", dtype=np.float64,
               inputs=[("moving.npy", m), ("fixed.npy", f)],
               outputs=[("out.npy", cc)], options=[("radius", "1")],
               generator="numpy float64 ANTs lncc over uniform_filter: a constant moving gives 0")


def grad_cases(rng):
    specs = [
        ("1_reflect", (6, 5, 7), 2, "reflect", 0),
        ("2_mirror_wide", (4, 6, 3), 3, "mirror", 0),
        ("nearest", (6, 5, 7), 2, "nearest", 0),
        ("wrap_batch", (2, 7, 6), [2, 1], "wrap", 2),
        ("constant", (6, 5, 7), [1, 2, 1], "constant", 0),
        ("default", (10, 9, 11), None, None, 0),
        ("twod_wide_reflect", (3, 5), 4, "reflect", 0),
    ]
    for dt in (np.float32, np.float64):
        t = np.dtype(dt).name
        for tag, shape, radius, mode, srank in specs:
            m, f = pair(rng, shape, dt)
            r = 4 if radius is None else radius
            md = "reflect" if mode is None else mode
            m64, f64 = m.astype(np.float64), f.astype(np.float64)
            options = []
            if radius is not None:
                options.append(("radius", opts_text(radius)))
            if mode is not None:
                options.append(("mode", mode))
            if srank:
                options.append(("spatial_rank", str(srank)))
            g = check_lncc_grad(rng, m64, f64, r, md, 1e-5, srank)
            yield dict(name=f"sim_lncc_grad_{tag}_{t}", op="lncc_grad", dtype=dt,
                       inputs=[("moving.npy", m), ("fixed.npy", f)],
                       outputs=[("out.npy", g.astype(dt))], options=options,
                       generator="numpy float64 closed form f B^T(P) - B^T(P fbar) + m B^T(Q) - "
                                 "B^T(Q mbar), B^T the transposed uniform_filter1d matrices; "
                                 "checked against central differences")
            gc = lncc_grad_center(m64, f64, r, md, 1e-5, srank)
            yield dict(name=f"sim_lncc_grad_center_{tag}_{t}", op="lncc_grad_center", dtype=dt,
                       inputs=[("moving.npy", m), ("fixed.npy", f)],
                       outputs=[("out.npy", gc.astype(dt))], options=options,
                       generator="numpy float64 ITK ANTSNeighborhoodCorrelation centre-only "
                                 "force over scipy.ndimage.uniform_filter1d box sums")
    # a flat moving window: ITK's guard gives 0 there
    m = np.zeros((6, 7, 5))
    m[:, :, 3:] = np.random.RandomState(3).uniform(size=(6, 7, 2))
    _, f = pair(rng, (6, 7, 5), np.float64)
    gc = lncc_grad_center(m, f, 1, "reflect", 1e-5)
    assert (gc == 0).any() and (gc != 0).any()
    yield dict(name="sim_lncc_grad_center_flat_float64", op="lncc_grad_center",
               dtype=np.float64, inputs=[("moving.npy", m), ("fixed.npy", f)],
               outputs=[("out.npy", gc)], options=[("radius", "1")],
               generator="numpy float64 ITK centre-only force; flat windows (s_mm <= eps) give 0")


def ncc_ref(x, y, w):
    """Pearson r: numpy.corrcoef, or numpy.cov with aweights for weights."""
    if w is None:
        return np.corrcoef(x.ravel(), y.ravel())[0, 1]
    c = np.cov(x.ravel(), y.ravel(), aweights=np.broadcast_to(w, x.shape).ravel())
    return c[0, 1] / np.sqrt(c[0, 0] * c[1, 1])


def ncc_formula(x, y, w, eps):
    w = np.ones(x.shape) if w is None else np.broadcast_to(w, x.shape).astype(np.float64)
    sw = max(w.sum(), eps)
    xd = x - (w * x).sum() / sw
    yd = y - (w * y).sum() / sw
    return (w * xd * yd).sum() / (np.sqrt((w * xd * xd).sum() * (w * yd * yd).sum()) + eps)


def ncc_cases(rng):
    for dt in (np.float32, np.float64):
        t = np.dtype(dt).name
        x = rng.standard_normal((5, 6, 7))
        y = 0.6 * x + 0.8 * rng.standard_normal((5, 6, 7)) + 3.0
        w = rng.uniform(0.1, 1.0, size=(6, 7))
        b = rng.uniform(size=(5, 6, 7)) > 0.4
        xs, ys, ws = x.astype(dt), y.astype(dt), w.astype(dt)
        x64, y64 = xs.astype(np.float64), ys.astype(np.float64)
        gen = "numpy.corrcoef; weights: numpy.cov(aweights) c01 / sqrt(c00 c11)"
        yield dict(name=f"sim_ncc_1_weights_{t}", op="ncc", dtype=dt,
                   inputs=[("x.npy", xs), ("y.npy", ys), ("mask.npy", ws)],
                   outputs=[("out.npy", np.array(ncc_ref(x64, y64, ws.astype(np.float64)),
                                                 dtype=dt))],
                   options=[("eps", "0")], generator=gen)
        yield dict(name=f"sim_ncc_2_plain_{t}", op="ncc", dtype=dt,
                   inputs=[("x.npy", xs), ("y.npy", -ys)],
                   outputs=[("out.npy", np.array(ncc_ref(x64, -y64, None), dtype=dt))],
                   options=[("eps", "0")], generator=gen)
        yield dict(name=f"sim_ncc_boolmask_{t}", op="ncc", dtype=dt,
                   inputs=[("x.npy", xs), ("y.npy", ys), ("mask.npy", b)],
                   outputs=[("out.npy", np.array(ncc_ref(x64[b], y64[b], None), dtype=dt))],
                   options=[("eps", "0")], generator="numpy.corrcoef over the mask's elements")
        r = ncc_formula(x64, y64, None, 1e-8)
        assert abs(r - ncc_ref(x64, y64, None)) < 1e-9
        yield dict(name=f"sim_ncc_default_eps_{t}", op="ncc", dtype=dt,
                   inputs=[("x.npy", xs), ("y.npy", ys)],
                   outputs=[("out.npy", np.array(r, dtype=dt))],
                   generator="numpy float64 sum(xd yd) / (sqrt(sum xd^2 sum yd^2) + 1e-8), "
                             "within 1e-9 of numpy.corrcoef")
    x = np.full((4, 5), 2.5)
    y = rng.standard_normal((4, 5))
    yield dict(name="sim_ncc_constant_float64", op="ncc", dtype=np.float64,
               inputs=[("x.npy", x), ("y.npy", y)], outputs=[("out.npy", np.array(0.0))],
               generator="the op's documented rule: a constant image gives 0 (corrcoef: nan)")


def cr_ref(m, f, bins, rng_f, w, eps=1e-10):
    w = np.ones(m.size) if w is None else np.broadcast_to(w, m.shape).ravel()
    m, f = m.ravel(), f.ravel()
    lo, hi = (f.min(), f.max()) if rng_f is None else rng_f
    scaled = np.clip((f - lo) / max(hi - lo, 1e-12) * (bins - 1), 0, bins - 1)
    lower = np.clip(np.floor(scaled).astype(np.int64), 0, bins - 2)
    frac = scaled - lower
    n_k, s_k = np.zeros(bins), np.zeros(bins)
    for idx, wt in ((lower, 1 - frac), (lower + 1, frac)):
        np.add.at(n_k, idx, w * wt)
        np.add.at(s_k, idx, w * wt * m)
    mu = (w * m).sum() / max(w.sum(), eps)
    total = (w * (m - mu) ** 2).sum()
    mu_k = s_k / (n_k + eps)
    return (n_k * (mu_k - mu) ** 2).sum() / (total + eps)


def cr_cases(rng):
    for dt in (np.float32, np.float64):
        t = np.dtype(dt).name
        f = rng.uniform(-1, 2, size=(6, 7, 5))
        m = np.cos(2 * f) + 0.2 * rng.standard_normal(f.shape)
        w = rng.uniform(0.1, 1, size=f.shape)
        b = rng.uniform(size=f.shape) > 0.3
        ms, fs, ws = m.astype(dt), f.astype(dt), w.astype(dt)
        m64, f64 = ms.astype(np.float64), fs.astype(np.float64)
        gen = "numpy float64 eta^2 over linear soft bins (floor/frac, numpy.add.at)"
        specs = [
            ("1_range_weights", ws, [("bins", "8"), ("range_fixed", "-0.5,1.5")], 8,
             (-0.5, 1.5)),
            ("2_data_range", None, [("bins", "6")], 6, None),
            ("default", None, [], 32, None),
            ("boolmask", b, [("bins", "5")], 5, None),
            ("bins2", None, [("bins", "2")], 2, None),
        ]
        for tag, mask, options, bins, rf in specs:
            inputs = [("moving.npy", ms), ("fixed.npy", fs)]
            wf = None
            if mask is not None:
                inputs.append(("mask.npy", mask))
                wf = mask.astype(np.float64)
            y = cr_ref(m64, f64, bins, rf, wf)
            yield dict(name=f"sim_cr_{tag}_{t}", op="correlation_ratio", dtype=dt, inputs=inputs,
                       outputs=[("out.npy", np.array(y, dtype=dt))], options=options,
                       generator=gen)
    # moving a function of fixed's bins: eta^2 = 1 with hard bins; constant images give 0
    f = rng.uniform(0, 1, size=(40,))
    yield dict(name="sim_cr_constant_moving_float64", op="correlation_ratio",
               dtype=np.float64, inputs=[("moving.npy", np.full(40, 1.5)), ("fixed.npy", f)],
               outputs=[("out.npy", np.array(0.0))], options=[("bins", "4")],
               generator="the op's documented rule: a constant moving gives 0")


def cases(rng):
    yield from ncc_cases(rng)
    yield from lncc_cases(rng)
    yield from grad_cases(rng)
    yield from cr_cases(rng)
