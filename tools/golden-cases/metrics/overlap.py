"""Overlap metrics: dice and jaccard (the closed forms in float64 NumPy), hausdorff95 and
surface_dice (a SciPy reimplementation of MONAI's algorithm: compute_hausdorff_distance with
percentile=95 and compute_surface_dice with use_subvoxels=False).

MONAI's algorithm, as written here:
  edges(m)   = m & ~scipy.ndimage.binary_erosion(m)    (the default structure: the cross of
               connectivity 1; border_value=0, so foreground on the array's edge is surface)
  d(a -> b)  = scipy.ndimage.distance_transform_edt(~edges(b), sampling=spacing)[edges(a)]
  hausdorff95 = max(np.percentile(d(p -> t), 95), np.percentile(d(t -> p), 95))  (linear)
  surface_dice = (#(d(p -> t) <= tol) + #(d(t -> p) <= tol)) / (|edges(p)| + |edges(t)|)
(MONAI crops both masks to the bounding box of their union with a margin of 1 first; that
changes neither the edges nor the distances between them, so it is left out.) Empty surfaces
follow the ops' documented rule: both empty NaN; one empty: hausdorff95 +inf, surface_dice 0.
"""
import numpy as np
from scipy import ndimage as ndi

PREFIX = "overlap_"


def _dice(p, t, axis, smooth):
    i = (p * t).sum(axis=axis)
    return (2 * i + smooth) / (p.sum(axis=axis) + t.sum(axis=axis) + smooth)


def _jaccard(p, t, axis, smooth):
    i = (p * t).sum(axis=axis)
    return (i + smooth) / (p.sum(axis=axis) + t.sum(axis=axis) - i + smooth)


def _reduce(y, reduction):
    if reduction == "sum":
        return np.array(y.sum())
    if reduction == "mean":
        return np.array(y.mean())
    return np.asarray(y)


def overlap_cases(rng):
    for op, fn in (("dice", _dice), ("jaccard", _jaccard)):
        for dt in (np.float32, np.float64):
            t = np.dtype(dt).name
            shape = (2, 3, 5, 6)
            p = (1 / (1 + np.exp(-2 * rng.standard_normal(shape)))).astype(dt)
            # a target in [0, 1]: mostly hard labels, some soft
            g = (rng.uniform(size=shape) > 0.5).astype(np.float64)
            soft = rng.uniform(size=shape) < 0.2
            g[soft] = rng.uniform(size=soft.sum())
            g = g.astype(dt)
            p64, g64 = p.astype(np.float64), g.astype(np.float64)
            base = dict(op=op, dtype=dt, inputs=[("pred.npy", p), ("target.npy", g)])
            gen = f"numpy float64 closed form of {op} over the axes, then the reduction"
            for name, axis, red, smooth in (
                    ("all", None, None, None),
                    ("axis_mean", (-2, -1), "mean", None),
                    ("axis_none", (2, 3), None, None),
                    ("axis1_sum", (1,), "sum", None),
                    ("smooth1", (0, 2, 3), None, 1.0)):
                opts = []
                if axis is not None:
                    opts.append(("axis", ",".join(map(str, axis))))
                if smooth is not None:
                    opts.append(("smooth", repr(smooth)))
                if red is not None:
                    opts.append(("reduction", red))
                ax = tuple(range(4)) if axis is None else axis
                y = _reduce(fn(p64, g64, ax, 1e-7 if smooth is None else smooth),
                            red or "none")
                yield dict(base, name=f"{PREFIX}{op}_{name}_{t}", options=opts,
                           outputs=[("out.npy", y.astype(dt))], generator=gen)
        # empty regions: both sums 0 score 1 with the default smooth
        p = rng.uniform(size=(3, 8))
        g = (rng.uniform(size=(3, 8)) > 0.5).astype(np.float64)
        p[1] = 0
        g[1] = 0
        y = fn(p, g, (1,), 1e-7)
        assert y[1] == 1.0
        yield dict(op=op, dtype=np.float64, name=f"{PREFIX}{op}_zz_empty_region_float64",
                   inputs=[("pred.npy", p), ("target.npy", g)], options=[("axis", "1")],
                   outputs=[("out.npy", y)],
                   generator=f"numpy float64 closed form; an empty region scores 1 (smooth)")


# ---- surface metrics: MONAI's algorithm in SciPy ----------------------------------------------

def _edges(m):
    m = m != 0
    return m & ~ndi.binary_erosion(m)


def _dist(ea, eb, spacing):
    if not eb.any():
        return np.full(int(ea.sum()), np.inf)
    return ndi.distance_transform_edt(~eb, sampling=spacing)[ea]


def _hd95(p, t, spacing):
    ep, et = _edges(p), _edges(t)
    if not ep.any() and not et.any():
        return np.nan
    if not ep.any() or not et.any():
        return np.inf
    return max(np.percentile(_dist(ep, et, spacing), 95),
               np.percentile(_dist(et, ep, spacing), 95))


def _nsd(p, t, spacing, tol, exact_ties=False):
    ep, et = _edges(p), _edges(t)
    dpt, dtp = _dist(ep, et, spacing), _dist(et, ep, spacing)
    finite = np.concatenate([dpt, dtp])
    finite = finite[np.isfinite(finite)]
    # keep every distance clear of the tolerance (the f32 EDT is good to 1e-4 relative), unless
    # the case tests ties on purpose: unit spacing, where d = sqrt(integer) is exact at d = tol
    if exact_ties:
        assert np.any(finite == tol), tol
    else:
        assert finite.size == 0 or np.min(np.abs(finite - tol)) > 1e-3 * max(tol, 1), tol
    complete = ep.sum() + et.sum()
    if complete == 0:
        return np.nan
    return ((dpt <= tol).sum() + (dtp <= tol).sum()) / complete


def _blob(rng, shape, sigma, level):
    return ndi.gaussian_filter(rng.standard_normal(shape), sigma) > level


def surface_cases(rng):
    gen_hd = "scipy MONAI hausdorff95: binary_erosion edges, distance_transform_edt, percentile"
    gen_nsd = "scipy MONAI surface_dice: binary_erosion edges, distance_transform_edt, counts"
    masks = []
    # 2-D blobs with anisotropic spacing; 3-D blobs; a 1-D pair; a single-voxel pred
    p2, t2 = _blob(rng, (24, 20), 2.0, 0.05), _blob(rng, (24, 20), 2.0, 0.05)
    masks.append(("d2", p2, t2, (1.0, 1.5), 2.3))
    p3, t3 = _blob(rng, (12, 14, 10), 1.5, 0.1), _blob(rng, (12, 14, 10), 1.5, 0.1)
    masks.append(("d3", p3, t3, (1.2, 0.9, 2.0), 1.9))
    p1 = np.zeros(30, bool)
    p1[4:11] = True
    p1[20:26] = True
    t1 = np.zeros(30, bool)
    t1[6:15] = True
    masks.append(("d1", p1, t1, (0.5,), 1.1))
    pv = np.zeros((9, 9), bool)
    pv[4, 4] = True
    tv = np.zeros((9, 9), bool)
    tv[1:8, 2:7] = True
    masks.append(("single_voxel", pv, tv, (1.0, 1.0), 2.5))
    # the whole array foreground: every edge voxel is surface (border_value 0)
    pf = np.ones((6, 7), bool)
    tf = np.zeros((6, 7), bool)
    tf[1:5, 1:6] = True
    masks.append(("full", pf, tf, (1.0, 1.0), 1.2))
    for tag, p, t, sp, tol in masks:
        spacing = ",".join(repr(s) for s in sp)
        hd = _hd95(p, t, sp)
        nsd = _nsd(p, t, sp, tol)
        yield dict(op="hausdorff95", dtype=np.float64, name=f"{PREFIX}hausdorff95_{tag}_float64",
                   inputs=[("pred.npy", p), ("target.npy", t)], options=[("spacing", spacing)],
                   outputs=[("out.npy", np.array(hd))], generator=gen_hd)
        yield dict(op="surface_dice", dtype=np.float64,
                   name=f"{PREFIX}surface_dice_{tag}_float64",
                   inputs=[("pred.npy", p), ("target.npy", t)],
                   options=[("spacing", spacing), ("tolerance", repr(tol))],
                   outputs=[("out.npy", np.array(nsd))], generator=gen_nsd)
    # f32 masks give f32 results; u8 masks (nonzero = foreground) give f64
    p, t = p2.astype(np.float32), t2.astype(np.float32)
    yield dict(op="hausdorff95", dtype=np.float32, name=f"{PREFIX}hausdorff95_d2_float32",
               inputs=[("pred.npy", p), ("target.npy", t)], options=[("spacing", "1.0,1.5")],
               outputs=[("out.npy", np.array(_hd95(p2, t2, (1.0, 1.5)), np.float32))],
               generator=gen_hd)
    yield dict(op="surface_dice", dtype=np.float32, name=f"{PREFIX}surface_dice_d2_float32",
               inputs=[("pred.npy", p), ("target.npy", t)],
               options=[("spacing", "1.0,1.5"), ("tolerance", "2.3")],
               outputs=[("out.npy", np.array(_nsd(p2, t2, (1.0, 1.5), 2.3), np.float32))],
               generator=gen_nsd)
    p, t = (p3 * 3).astype(np.uint8), (t3 * 7).astype(np.uint8)
    yield dict(op="hausdorff95", dtype=np.float64, name=f"{PREFIX}hausdorff95_d3_u8_float64",
               inputs=[("pred.npy", p), ("target.npy", t)], options=[("spacing", "2.0")],
               outputs=[("out.npy", np.array(_hd95(p3, t3, (2.0,) * 3)))], generator=gen_hd)
    # an integer tolerance on a unit grid: distances equal to it (exact sqrt of a square) count
    yield dict(op="surface_dice", dtype=np.float64,
               name=f"{PREFIX}surface_dice_d3_u8_tie_float64",
               inputs=[("pred.npy", p), ("target.npy", t)], options=[("tolerance", "2")],
               outputs=[("out.npy", np.array(_nsd(p3, t3, (1.0,) * 3, 2.0, True)))],
               generator=gen_nsd + " (d <= tol at d = tol)")
    # empty masks: the ops' rule
    z = np.zeros((9, 9), bool)
    for name, p, t, hd, nsd in (("empty_both", z, z, np.nan, np.nan),
                                ("empty_pred", z, pv, np.inf, 0.0),
                                ("empty_target", tv, z, np.inf, 0.0)):
        assert np.array_equal(np.array(_hd95(p, t, (1, 1))), np.array(hd), equal_nan=True)
        yield dict(op="hausdorff95", dtype=np.float64, name=f"{PREFIX}hausdorff95_{name}_float64",
                   inputs=[("pred.npy", p), ("target.npy", t)], options=[],
                   outputs=[("out.npy", np.array(hd))],
                   generator="the op's documented rule for empty surfaces")
        yield dict(op="surface_dice", dtype=np.float64,
                   name=f"{PREFIX}surface_dice_{name}_float64",
                   inputs=[("pred.npy", p), ("target.npy", t)], options=[("tolerance", "1")],
                   outputs=[("out.npy", np.array(nsd))],
                   generator="the op's documented rule for empty surfaces")


def cases(rng):
    yield from overlap_cases(rng)
    yield from surface_cases(rng)
