"""The normalisers (docs/numerics.md) against float64 NumPy closed forms: means, standard
deviations, numpy.median / numpy.percentile (method linear, numpy's default) and norms written
here from their definitions. Inputs are rounded to the case's dtype first; the oracle computes in
float64 from those values."""
import numpy as np

PREFIX = "norm_"
DTYPES = (np.float64, np.float32)


def f64(a):
    return np.asarray(a, dtype=np.float64)


def case(name, op, dt, inputs, outputs, options=(), generator=""):
    t = np.dtype(dt).name
    return dict(name=f"norm_{op}_{name}_{t}", op=op, dtype=dt,
                inputs=[(f, np.asarray(a).astype(dt) if np.asarray(a).dtype.kind == "f" else a)
                        for f, a in inputs],
                outputs=[(f, np.asarray(a).astype(dt)) for f, a in outputs],
                options=list(options), generator=generator)


def demean(rng, dt):
    x = rng.standard_normal((4, 5, 6)).astype(dt)
    X = f64(x)
    yield case("a_default", "demean", dt, [("x.npy", x)],
               [("y.npy", X - X.mean(axis=-1, keepdims=True))],
               generator="numpy float64 x - x.mean(axis=-1, keepdims=True)")
    w = rng.uniform(0.1, 2.0, size=(6,)).astype(dt)
    W = np.broadcast_to(f64(w), X.shape)
    yield case("b_weights", "demean", dt, [("x.npy", x), ("weights.npy", w)],
               [("y.npy", X - (W * X).sum(-1, keepdims=True) / W.sum(-1, keepdims=True))],
               generator="numpy float64 x - sum(w x, -1) / sum(w, -1), w broadcast")
    yield case("c_axes02", "demean", dt, [("x.npy", x)],
               [("y.npy", X - X.mean(axis=(0, 2), keepdims=True))], options=[("axis", "0,2")],
               generator="numpy float64 x - x.mean(axis=(0, 2), keepdims=True)")
    wb = rng.uniform(size=(5, 1)) > 0.4
    wb[0, 0] = True
    Wb = np.broadcast_to(f64(wb), (4, 5, 6))
    yield case("d_boolweights_axis1", "demean", dt, [("x.npy", x), ("weights.npy", wb)],
               [("y.npy", X - (Wb * X).sum(1, keepdims=True) / Wb.sum(1, keepdims=True))],
               options=[("axis", "1")],
               generator="numpy float64 x minus the mean over axis 1 of the entries where w")


def zscore(rng, dt):
    x = (rng.standard_normal((5, 8)) * 3 + 2).astype(dt)
    X = f64(x)
    yield case("a_default", "zscore_normalize", dt, [("x.npy", x)],
               [("y.npy", (X - X.mean()) / (X.std() + 1e-12))],
               generator="numpy float64 (x - x.mean()) / (x.std() + 1e-12)")
    m = X.mean(1, keepdims=True)
    s = X.std(1, ddof=1, keepdims=True)
    yield case("b_axis1_ddof1", "zscore_normalize", dt, [("x.npy", x)],
               [("y.npy", (X - m) / (s + 1e-6))],
               options=[("axis", "1"), ("ddof", "1"), ("eps", "1e-6")],
               generator="numpy float64 (x - mean) / (std(ddof=1) + eps) over axis 1")
    z = x.copy()
    z[rng.uniform(size=z.shape) < 0.35] = 0
    Z = f64(z)
    nz = Z != 0
    mu = Z[nz].mean()
    sd = Z[nz].std()
    yield case("c_nonzero_mask", "zscore_normalize", dt, [("x.npy", z)],
               [("y.npy", np.where(nz, (Z - mu) / (sd + 1e-12), 0.0))],
               options=[("nonzero_mask", "true")],
               generator="numpy float64 nnU-Net's masked z-score: stats of x[x != 0]; zeros stay 0")


def psc(rng, dt):
    x = (rng.standard_normal((3, 4, 12)) * 5 + 100).astype(dt)
    X = f64(x)
    m = X.mean(-1, keepdims=True)
    yield case("a_default", "psc_normalize", dt, [("x.npy", x)], [("y.npy", 100 * (X - m) / m)],
               generator="numpy float64 100 (x - m) / m, m = x.mean(-1)")
    x2 = x.copy()
    x2[1, 2, :] = 0
    X2 = f64(x2)
    m2 = X2.mean(0, keepdims=True)
    y2 = np.where(m2 != 0, 100 * (X2 - m2) / np.where(m2 != 0, m2, 1), 0.0)
    yield case("b_axis0_zero_mean", "psc_normalize", dt, [("x.npy", x2)], [("y.npy", y2)],
               options=[("axis", "0")],
               generator="numpy float64 100 (x - m) / m over axis 0; 0 where m = 0")


def robust(rng, dt):
    x = rng.standard_normal((4, 7)).astype(dt)
    X = f64(x)
    med = np.median(X)
    mad = np.median(np.abs(X - med))
    yield case("a_default", "robust_zscore_normalize", dt, [("x.npy", x)],
               [("y.npy", (X - med) / (1.4826 * mad + 1e-12))],
               generator="numpy float64 (x - median) / (1.4826 median|x - median| + 1e-12)")
    x2 = rng.standard_normal((3, 6)).astype(dt)
    X2 = f64(x2)
    med = np.median(X2, axis=-1, keepdims=True)
    mad = np.median(np.abs(X2 - med), axis=-1, keepdims=True)
    yield case("b_axis_even_scale1", "robust_zscore_normalize", dt, [("x.npy", x2)],
               [("y.npy", (X2 - med) / (mad + 1e-12))],
               options=[("axis", "-1"), ("scale", "1")],
               generator="numpy float64 numpy.median along the last axis (even n), raw MAD")


def intensity(rng, dt):
    x = rng.gamma(2.0, 10.0, size=(6, 7, 5)).astype(dt)
    X = f64(x)
    lo, hi = np.percentile(X, [1, 99])
    yield case("a_default", "intensity_normalize", dt, [("x.npy", x)],
               [("y.npy", np.clip((X - lo) / (hi - lo), 0, 1))],
               generator="numpy float64 clip((x - p1) / (p99 - p1), 0, 1), numpy.percentile")
    lo = np.percentile(X, 5, axis=(0, 2), keepdims=True)
    hi = np.percentile(X, 95, axis=(0, 2), keepdims=True)
    yield case("b_axes_5_95", "intensity_normalize", dt, [("x.npy", x)],
               [("y.npy", np.clip((X - lo) / (hi - lo), 0, 1))],
               options=[("low_percentile", "5"), ("high_percentile", "95"), ("axis", "0,2")],
               generator="numpy float64 numpy.percentile(x, 5|95, axis=(0, 2)), then clip")


def prescale(rng, dt):
    x = (rng.standard_normal((5, 6, 4)) * 20 + 50).astype(dt)
    X = f64(x)
    lo, hi = np.percentile(X, [2.5, 97.5])
    yield case("a_noclip", "percentile_rescale", dt, [("x.npy", x)],
               [("y.npy", (X - lo) / (hi - lo + 1e-8))],
               options=[("lo", "2.5"), ("hi", "97.5"), ("clip", "false")],
               generator="numpy float64 (x - p2.5) / (p97.5 - p2.5 + 1e-8), numpy.percentile")
    m = rng.uniform(size=x.shape) > 0.5
    lo, hi = np.percentile(X[m], [10, 90])
    yield case("b_mask_noclip", "percentile_rescale", dt, [("x.npy", x), ("mask.npy", m)],
               [("y.npy", (X - lo) / (hi - lo + 1e-8))],
               options=[("lo", "10"), ("hi", "90"), ("clip", "false")],
               generator="numpy float64 percentiles of x[mask] (numpy.percentile), all rescaled")
    lo, hi = np.percentile(X, [0, 99])
    yield case("c_default", "percentile_rescale", dt, [("x.npy", x)],
               [("y.npy", np.clip((X - lo) / (hi - lo + 1e-8), 0, 1))],
               generator="numpy float64 clip((x - p0) / (p99 - p0 + 1e-8), 0, 1)")
    mi = (rng.uniform(size=(5, 24)) > 0.3).astype(np.uint8)
    mi[2] = 0
    x2 = x.reshape(5, 24)
    X2 = f64(x2)
    y = np.empty_like(X2)
    for r in range(5):
        sel = X2[r][mi[r] != 0]
        lo, hi = np.percentile(sel, [5, 95]) if sel.size else (0.0, 0.0)
        y[r] = np.clip((X2[r] - lo) / (hi - lo + 1e-3), 0, 1)
    yield case("d_mask_axis_emptyline", "percentile_rescale", dt, [("x.npy", x2), ("mask.npy", mi)],
               [("y.npy", y)],
               options=[("lo", "5"), ("hi", "95"), ("axis", "-1"), ("eps", "1e-3")],
               generator="numpy float64 per-row numpy.percentile of x[mask]; an empty row's "
                         "percentiles are 0 (the op's documented rule)")


def norms(rng, dt):
    x0 = rng.standard_normal((4, 6)).astype(dt)
    for p, tag in ((2, "a_p2"), (1, "b_p1"), (3.5, "c_p3.5_zero_row")):
        x = x0.copy()
        if tag.startswith("c"):  # a zero row stays 0 (x / eps of 0); not an FD case (order)
            x[2] = 0
        X = f64(x)
        n = (np.abs(X) ** p).sum(-1, keepdims=True) ** (1 / p)
        yield case(tag, "lp_normalize", dt, [("x.npy", x)],
                   [("y.npy", X / np.maximum(n, 1e-12))], options=[("p", str(p))],
                   generator=f"numpy float64 x / max(sum(|x|^{p})^(1/{p}), 1e-12) along -1; "
                             "a zero row stays 0")
    X = f64(x0)
    n = np.sqrt((X ** 2).sum(0, keepdims=True))
    yield case("a_axis0", "l2_normalize", dt, [("x.npy", x0)],
               [("y.npy", X / np.maximum(n, 1e-12))], options=[("axis", "0")],
               generator="numpy float64 x / max(||x||_2 along 0, 1e-12)")
    n = np.sqrt((X ** 2).sum(-1, keepdims=True))
    yield case("b_default", "l2_normalize", dt, [("x.npy", x0)],
               [("y.npy", X / np.maximum(n, 1e-12))],
               generator="numpy float64 x / max(||x||_2 along -1, 1e-12)")
    X[1] = 0
    x = X.astype(dt)
    n = np.sqrt((X ** 2).sum(-1, keepdims=True))
    yield case("c_default_zero_row", "l2_normalize", dt, [("x.npy", x)],
               [("y.npy", X / np.maximum(n, 1e-12))],
               generator="numpy float64 x / max(||x||_2 along -1, 1e-12); a zero row stays 0")


def inorm(rng, dt):
    x = (rng.standard_normal((2, 3, 4, 5)) * 2 + 1).astype(dt)
    X = f64(x)
    m = X.mean((2, 3), keepdims=True)
    v = X.var((2, 3), keepdims=True)
    yield case("a_default", "instance_norm", dt, [("x.npy", x)],
               [("y.npy", (X - m) / np.sqrt(v + 1e-5))],
               generator="numpy float64 (x - mean) / sqrt(var + 1e-5) over axes 2, 3")
    m = X.mean(-1, keepdims=True)
    v = X.var(-1, keepdims=True)
    yield case("b_axes_last", "instance_norm", dt, [("x.npy", x)],
               [("y.npy", (X - m) / np.sqrt(v + 1e-3))], options=[("axes", "-1"), ("eps", "1e-3")],
               generator="numpy float64 (x - mean) / sqrt(var + 1e-3) over the last axis")


def cases(rng):
    for dt in DTYPES:
        for gen in (demean, zscore, psc, robust, intensity, prescale, norms, inorm):
            yield from gen(rng, dt)
