"""Joint histogram, mutual information, its closed-form gradients, winsorize and match_histogram,
from a float64 NumPy implementation written here (never nitrix):

- joint_histogram: the triangular (linear) Parzen window: s = clip((x - lo) / (hi - lo) (bins - 1),
  0, bins - 1), l = min(floor(s), bins - 2), t = s - l; each sample adds w (1 - t_m or t_m)
  (1 - t_f or t_f) to its four cells by numpy.add.at; P = H / sum(H). On integer-valued images
  whose values are the bin centres the window is hard binning: those cases are checked against
  numpy.histogram2d as well, and MI against sklearn.metrics.mutual_info_score.
- mutual_information: sum over populated cells of P log(P / (p_m p_f)); NMI (H_m + H_f) / H_mf.
- mi_grad / nmi_grad: the closed forms (ops/metrics/mi_grad.c, nmi_grad.c) in NumPy; before a
  case is written the generator checks them against central differences of the NumPy MI / NMI
  (a check of the derivation, not the reference).
- winsorize: numpy.quantile (linear) and numpy.clip.
- match_histogram: numpy.quantile at numpy.linspace(0, 1, bins) of both images and numpy.interp.
"""
import numpy as np

PREFIX = "hist_"

F64 = np.float64


def soft_bin(x, bins, rng_):
    x = np.asarray(x, F64).ravel()
    lo, hi = (x.min(), x.max()) if rng_ is None else (F64(rng_[0]), F64(rng_[1]))
    span = max(hi - lo, 1e-12)
    s = np.clip((x - lo) / span * (bins - 1), 0, bins - 1)
    low = np.minimum(np.floor(s), bins - 2).astype(np.int64)
    return low, s - low, lo, hi


def joint(m, f, bins, rm=None, rf=None, w=None, stride=1):
    lm, tm, _, _ = soft_bin(m, bins, rm)
    lf, tf, _, _ = soft_bin(f, bins, rf)
    w = np.ones(lm.shape) if w is None else np.broadcast_to(np.asarray(w, F64), np.shape(m)).ravel()
    lm, tm, lf, tf, w = (a[::stride] for a in (lm, tm, lf, tf, w))
    h = np.zeros((bins, bins))
    for da, wa in ((0, 1 - tm), (1, tm)):
        for db, wb in ((0, 1 - tf), (1, tf)):
            np.add.at(h, (lm + da, lf + db), w * wa * wb)
    s = h.sum()
    return h / s if s > 0 else h


def entropy(p):
    q = p[p > 0]
    return -np.sum(q * np.log(q))


def mi(p, normalized=False):
    pm, pf = p.sum(1), p.sum(0)
    if normalized:
        hmf = entropy(p)
        return (entropy(pm) + entropy(pf)) / hmf if hmf > 0 else 0.0
    nz = p > 0
    outer = np.outer(pm, pf)
    return np.sum(p[nz] * np.log(p[nz] / outer[nz]))


def safe_log(p):
    out = np.zeros_like(p)
    out[p > 0] = np.log(p[p > 0])
    return out


def closed_form(m, f, bins, rm=None, rf=None, stride=1, normalized=False):
    """The per-sample closed-form gradient of MI (or NMI) with respect to moving."""
    p = joint(m, f, bins, rm, rf, stride=stride)
    lm, tm, lo, hi = soft_bin(m, bins, rm)
    lf, tf, _, _ = soft_bin(f, bins, rf)
    x = np.asarray(m, F64).ravel()
    scale = (bins - 1) / max(hi - lo, 1e-6) / x.size
    pm, pf = p.sum(1), p.sum(0)

    def rows(t):  # (1 - t_f) T[l_m, l_f] + t_f T[l_m, l_f + 1]
        return (1 - tf) * t[lm, lf] + tf * t[lm, lf + 1]

    if not normalized:
        w = np.where(p > 0, safe_log(p) - safe_log(pm)[:, None], 0.0)
        g = scale * rows(w[1:] - w[:-1])
    else:
        lp = safe_log(p)
        dhmf = -scale * rows(lp[1:] - lp[:-1])
        lpm = safe_log(pm)
        dhm = -scale * (lpm[1:] - lpm[:-1])[lm]
        hm, hf, hmf = entropy(pm), entropy(pf), entropy(p)
        g = (dhm * hmf - (hm + hf) * dhmf) / hmf ** 2 if hmf > 0 else np.zeros_like(x)
    g = np.where((x >= lo) & (x <= hi), g, 0.0)
    return g.reshape(np.shape(m))


def check_closed_form(m, f, bins, rm, rf, normalized):
    """Central differences of the NumPy MI at a few samples against the closed form."""
    g = closed_form(m, f, bins, rm, rf, normalized=normalized).ravel()
    x = np.asarray(m, F64).copy().ravel()
    h = 1e-6
    skip = () if rm is not None else (x.argmin(), x.argmax())  # they move the data range
    for i in range(0, x.size, max(1, x.size // 7)):
        if i in skip:
            continue
        xp, xm = x.copy(), x.copy()
        xp[i] += h
        xm[i] -= h
        fd = (mi(joint(xp.reshape(np.shape(m)), f, bins, rm, rf), normalized)
              - mi(joint(xm.reshape(np.shape(m)), f, bins, rm, rf), normalized)) / (2 * h)
        assert abs(fd - g[i]) <= 1e-6 * max(1.0, np.abs(g).max()) * 10, (i, fd, g[i])


def quantile_lerp(x, q):
    return np.quantile(np.asarray(x, F64).ravel(), q)


def near_centre(x, bins, rng_):
    """The distance of the samples' scaled values (before clipping) to the nearest bin centre,
    the data range's own ends excluded: a central difference that crosses a bin centre (or a
    range end) measures neither side's slope."""
    x = np.asarray(x, F64).ravel()
    lo, hi = (x.min(), x.max()) if rng_ is None else rng_
    s = (x - lo) / (hi - lo) * (bins - 1)
    if rng_ is None:
        s = s[(x != lo) & (x != hi)]
    near = np.clip(np.round(s), 0, bins - 1)
    return np.abs(s - near).min()


def pair(rng, shape, dt, settings):
    """Correlated images whose samples all lie at least 1e-4 of a bin from a bin centre under
    each (bins, range_moving, range_fixed) of settings (FD cases differentiate there)."""
    while True:
        a = rng.standard_normal(shape).astype(dt)
        b = (0.6 * a + 0.8 * rng.standard_normal(shape) + 0.3 * a.astype(F64) ** 2).astype(dt)
        if all(near_centre(a, k, r) > 1e-4 and near_centre(b, k, q) > 1e-4
               for k, r, q in settings):
            return a, b


def cases(rng):
    for dt in (np.float64, np.float32):
        t = np.dtype(dt).name
        rm, rf = (-1.5, 1.2), (-1.0, 2.0)  # some samples outside: the edge bins take them
        a, b = pair(rng, (6, 7, 8), dt, [(k, None, None) for k in (5, 7, 8, 10, 32)]
                    + [(6, rm, rf), (6, None, rf)])
        ins = [("moving.npy", a), ("fixed.npy", b)]
        base = dict(op="joint_histogram", dtype=dt)
        gen = "numpy float64 triangular Parzen window (numpy.add.at), P = H / sum(H)"

        # joint_histogram
        yield dict(base, name=f"hist_jh_a_default_{t}", inputs=ins,
                   outputs=[("P.npy", joint(a, b, 8).astype(dt))], options=[("bins", 8)],
                   generator=gen)
        w = rng.uniform(0.2, 1.0, size=(7, 8)).astype(dt)
        yield dict(base, name=f"hist_jh_b_ranges_weights_{t}",
                   inputs=ins + [("mask.npy", w)],
                   outputs=[("P.npy", joint(a, b, 6, rm, rf, w).astype(dt))],
                   options=[("bins", 6), ("range_moving", "-1.5,1.2"),
                            ("range_fixed", "-1,2")], generator=gen + ", w broadcast")
        yield dict(base, name=f"hist_jh_c_scatter_{t}", inputs=ins,
                   outputs=[("P.npy", joint(a, b, 32).astype(dt))],
                   options=[("driver", "scatter")], generator=gen)
        yield dict(base, name=f"hist_jh_d_onehot_{t}", inputs=ins,
                   outputs=[("P.npy", joint(a, b, 5).astype(dt))],
                   options=[("bins", 5), ("driver", "onehot")], generator=gen)
        mb = rng.uniform(size=(6, 7, 8)) > 0.3
        yield dict(base, name=f"hist_jh_e_boolmask_{t}", inputs=ins + [("mask.npy", mb)],
                   outputs=[("P.npy", joint(a, b, 7, w=mb).astype(dt))],
                   options=[("bins", 7)], generator=gen + ", the mask's samples")
        # integer values 0..7 on the bin centres of the data range: hard binning
        ia = rng.randint(0, 8, size=(9, 10)).astype(dt)
        ib = np.clip(ia + rng.randint(-1, 2, size=(9, 10)), 0, 7).astype(dt)
        ia.flat[0], ia.flat[1], ib.flat[0], ib.flat[1] = 0, 7, 0, 7
        hard = np.histogram2d(ia.ravel(), ib.ravel(), bins=8, range=[[-0.5, 7.5], [-0.5, 7.5]])[0]
        assert np.allclose(joint(ia, ib, 8), hard / hard.sum(), rtol=0, atol=1e-15)
        iins = [("moving.npy", ia), ("fixed.npy", ib)]
        fd_hard = "samples sit on bin centres, where the triangular window has a kink"
        yield dict(base, name=f"hist_jh_f_hardbins_{t}", inputs=iins,
                   outputs=[("P.npy", (hard / hard.sum()).astype(dt))], options=[("bins", 8)],
                   generator="numpy.histogram2d (hard bins: samples on bin centres)", fd=fd_hard)
        yield dict(base, name=f"hist_jh_z_emptymask_{t}",
                   inputs=ins + [("mask.npy", np.zeros((6, 7, 8), bool))],
                   outputs=[("P.npy", np.zeros((4, 4), dt))], options=[("bins", 4)],
                   generator="the op's documented rule: an empty mask gives the all-zero table")

        # mutual_information
        base = dict(op="mutual_information", dtype=dt)
        gen = "numpy float64 sum_{P>0} P log(P / (p_m p_f)) of the Parzen table"
        yield dict(base, name=f"hist_mi_a_default_{t}", inputs=ins,
                   outputs=[("y.npy", np.array(mi(joint(a, b, 8)), dt))],
                   options=[("bins", 8)], generator=gen)
        yield dict(base, name=f"hist_mi_b_nmi_ranges_{t}", inputs=ins,
                   outputs=[("y.npy", np.array(mi(joint(a, b, 6, rm, rf), True), dt))],
                   options=[("bins", 6), ("range_moving", "-1.5,1.2"), ("range_fixed", "-1,2"),
                            ("normalized", "true")],
                   generator="numpy float64 (H_m + H_f) / H_mf of the Parzen table")
        yield dict(base, name=f"hist_mi_c_weights_scatter_{t}", inputs=ins + [("mask.npy", w)],
                   outputs=[("y.npy", np.array(mi(joint(a, b, 32, w=w)), dt))],
                   options=[("driver", "scatter")], generator=gen + ", w broadcast")
        yield dict(base, name=f"hist_mi_d_nmi_{t}", inputs=ins,
                   outputs=[("y.npy", np.array(mi(joint(a, b, 10), True), dt))],
                   options=[("bins", 10), ("normalized", "true")],
                   generator="numpy float64 (H_m + H_f) / H_mf of the Parzen table")
        from sklearn.metrics import mutual_info_score
        hard_mi = mutual_info_score(ia.ravel().astype(int), ib.ravel().astype(int))
        assert abs(hard_mi - mi(joint(ia, ib, 8))) < 1e-12
        yield dict(base, name=f"hist_mi_f_hardbins_sklearn_{t}", inputs=iins,
                   outputs=[("y.npy", np.array(hard_mi, dt))], options=[("bins", 8)],
                   generator="sklearn.metrics.mutual_info_score (hard bins: samples on bin "
                   "centres)", sklearn=True, fd=fd_hard)
        yield dict(base, name=f"hist_mi_z_emptymask_{t}",
                   inputs=ins + [("mask.npy", np.zeros((7, 8), bool))],
                   outputs=[("y.npy", np.array(0.0, dt))], options=[("normalized", "true")],
                   generator="the op's documented rule: an empty mask gives 0")

        # mi_grad, nmi_grad: pinned ranges holding every sample, then the data range
        off = 0.25
        while near_centre(a, 8, (float(a.min()) - 0.25, float(a.max()) + off)) <= 1e-4:
            off += 0.01
        pr = (float(a.min()) - 0.25, float(a.max()) + off)
        prs = f"{pr[0]!r},{pr[1]!r}"
        for op, norm, tag in (("mi_grad", False, "mig"), ("nmi_grad", True, "nmig")):
            base = dict(op=op, dtype=dt)
            gen = f"numpy float64 closed form of d{'NMI' if norm else 'MI'}/dmoving " \
                  "(checked against central differences of the numpy metric)"
            if dt == np.float64:
                check_closed_form(a, b, 8, pr, None, norm)
                check_closed_form(a, b, 6, None, rf, norm)
            yield dict(base, name=f"hist_{tag}_a_ranges_{t}", inputs=ins,
                       outputs=[("grad.npy", closed_form(a, b, 8, pr, None,
                                                         normalized=norm).astype(dt))],
                       options=[("bins", 8), ("range_moving", prs)], generator=gen)
            yield dict(base, name=f"hist_{tag}_b_default_{t}", inputs=ins,
                       outputs=[("grad.npy", closed_form(a, b, 6, None, rf,
                                                         normalized=norm).astype(dt))],
                       options=[("bins", 6), ("range_fixed", "-1,2")], generator=gen)
            yield dict(base, name=f"hist_{tag}_c_stride_scatter_{t}", inputs=ins,
                       outputs=[("grad.npy", closed_form(a, b, 32, stride=3,
                                                         normalized=norm).astype(dt))],
                       options=[("sample_stride", 3), ("driver", "scatter")],
                       generator=gen.split(" (")[0] + ", P from every 3rd sample, / N")

        # winsorize
        x = rng.standard_normal((4, 5, 6)).astype(dt)
        base = dict(op="winsorize", dtype=dt, inputs=[("image.npy", x)])
        for name, lo, hi, opts in (("a_default", 0.005, 0.995, []),
                                   ("b_tenth", 0.1, 0.9, [("lower", 0.1), ("upper", 0.9)]),
                                   ("c_equal", 0.5, 0.5, [("lower", 0.5), ("upper", 0.5)]),
                                   ("d_ends", 0.0, 1.0, [("lower", 0), ("upper", 1)])):
            ql, qh = quantile_lerp(x, [lo, hi])
            yield dict(base, name=f"hist_wins_{name}_{t}",
                       outputs=[("y.npy", np.clip(x.astype(F64), ql, qh).astype(dt))],
                       options=opts, generator="numpy.clip(x, *numpy.quantile(x, (lower, upper)))")

        # match_histogram
        mv = (rng.standard_normal((4, 5, 6)) * 2 + 1).astype(dt)
        ref = rng.gamma(2.0, 1.5, size=(7, 9)).astype(dt)
        base = dict(op="match_histogram", dtype=dt,
                    inputs=[("moving.npy", mv), ("reference.npy", ref)])
        for name, bins in (("a_16", 16), ("b_default", 256), ("c_2", 2)):
            qs = np.linspace(0, 1, bins)
            y = np.interp(mv.astype(F64).ravel(), quantile_lerp(mv, qs), quantile_lerp(ref, qs))
            yield dict(base, name=f"hist_mh_{name}_{t}",
                       outputs=[("y.npy", y.reshape(mv.shape).astype(dt))],
                       options=[] if bins == 256 else [("bins", bins)],
                       generator="numpy.interp(moving, numpy.quantile(moving, q), "
                       "numpy.quantile(reference, q)), q = numpy.linspace(0, 1, bins)")
