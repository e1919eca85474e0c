"""spatial_transform: image [*lead, *sp, C] sampled at deformation [*lead, *sp', nd] (absolute index
coordinates), scipy.ndimage.map_coordinates (orders 0, 1, 3) in every mode with points outside
the grid, closed-form lanczos and catmull-rom kernels on numpy.pad'ed images, multilabel as
indicator resampling + argmax (see lib/oracle.py for the mode names)."""
import importlib.util
import os

import numpy as np

_spec = importlib.util.spec_from_file_location(
    "geo_oracle", os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "oracle.py"))
orc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(orc)

PREFIX = "spatial_transform_"
MODES = ("constant", "nearest", "wrap", "mirror", "reflect")


def field(rng, lead, sp_in, sp_out, lo=-2.5, hi=None):
    nd = len(sp_in)
    hi = [n + 1.5 for n in sp_in] if hi is None else hi
    return np.stack([rng.uniform(lo, hi[a], size=lead + sp_out) for a in range(nd)], axis=-1)


def run(img, d, method, mode, cval=0.0, order=3, labels=None):
    """Batched over the leading axes."""
    nd = d.shape[-1]
    lead = img.shape[:img.ndim - nd - 1]
    out = np.zeros(d.shape[:-1] + (img.shape[-1],))
    for idx in np.ndindex(*lead):
        out[idx] = orc.sample(img[idx], d[idx], method, mode, cval, order, labels)
    return out


def case(name, dt, img, d, method, mode, cval=0.0, order=3, labels=None, extra=None):
    img = img.astype(dt)
    d = d.astype(dt)
    y = run(img.astype(np.float64), d.astype(np.float64), method, mode, cval, order, labels)
    opts = [("method", method), ("mode", mode), ("cval", cval)]
    if method == "lanczos":
        opts.append(("order", order))
    if labels is not None:
        opts.append(("labels", ",".join(str(v) for v in labels)))
    gen = {"linear": "scipy.ndimage.map_coordinates(order=1)",
           "nearest": "scipy.ndimage.map_coordinates(order=0)",
           "cubic_bspline": "scipy.ndimage.spline_filter(mirror) + map_coordinates(order=3)",
           "lanczos": "closed-form lanczos on numpy.pad",
           "catmull_rom": "closed-form catmull-rom on numpy.pad",
           "multilabel": "map_coordinates(order=1) of each indicator + numpy.argmax"}[method]
    c = dict(op="spatial_transform", dtype=dt, name=name,
             inputs=[("image.npy", img), ("deformation.npy", d)],
             outputs=[("out.npy", y.astype(dt))], options=opts,
             generator=f"{gen}, mode {orc.SCIPY_MODE[mode]}")
    if method == "multilabel":
        c["fd"] = "multilabel is an argmax: no gradient"
    if extra:
        c.update(extra)
    return c


def cases(rng):
    f64, f32 = np.float64, np.float32
    # the FD test's two cases: trilinear in 3-D with a batch axis and channels, cubic in 2-D
    img = rng.standard_normal((2, 5, 6, 4, 2))
    yield case(PREFIX + "0_linear_3d_lead_float64", f64, img,
               field(rng, (2,), (5, 6, 4), (3, 4, 3)), "linear", "constant", 0.5)
    img = rng.standard_normal((7, 6, 1))
    yield case(PREFIX + "1_cubic_2d_float64", f64, img, field(rng, (), (7, 6), (5, 4)),
               "cubic_bspline", "mirror")
    for dt in (f64, f32):
        t = np.dtype(dt).name
        for order, meth in ((0, "nearest"), (1, "linear"), (3, "cubic_bspline")):
            for mode in MODES:
                img = rng.standard_normal((6, 7, 5, 1))
                d = field(rng, (), (6, 7, 5), (4, 3, 5))
                yield case(PREFIX + f"{meth}_{mode}_3d_{t}", dt, img, d, meth, mode, 1.5)
        for meth in ("lanczos", "catmull_rom"):
            for mode in MODES:
                img = rng.standard_normal((7, 6, 2))
                d = field(rng, (), (7, 6), (4, 5))
                yield case(PREFIX + f"{meth}_{mode}_2d_{t}", dt, img, d, meth, mode, -0.5)
        img = rng.standard_normal((3, 9, 1))
        yield case(PREFIX + f"linear_1d_lead_{t}", dt, img, field(rng, (3,), (9,), (11,)),
                   "linear", "reflect")
        yield case(PREFIX + f"cubic_1d_wrap_{t}", dt, rng.standard_normal((10, 3)),
                   field(rng, (), (10,), (12,)), "cubic_bspline", "wrap")
        yield case(PREFIX + f"lanczos2_1d_{t}", dt, rng.standard_normal((9, 1)),
                   field(rng, (), (9,), (10,)), "lanczos", "nearest", order=2)
        # lanczos(3) in 3-D: 216 tap combinations, the sampler's reduction form
        img = rng.standard_normal((5, 6, 4, 1))
        yield case(PREFIX + f"lanczos_3d_mirror_{t}", dt, img, field(rng, (), (5, 6, 4), (3, 2, 3)),
                   "lanczos", "mirror", order=3)
        lab = rng.randint(0, 4, size=(6, 5, 4, 1)).astype(np.float64) * 2.0
        yield case(PREFIX + f"multilabel_3d_{t}", dt, lab, field(rng, (), (6, 5, 4), (4, 4, 3)),
                   "multilabel", "constant", 2.0, labels=[0.0, 2.0, 4.0, 6.0])
    # the documented non-finite rule: a point with a NaN or infinite coordinate is NaN
    d = field(rng, (), (5, 6), (3, 4))
    d[0, 1, 0] = np.nan
    d[1, 2, 1] = np.inf
    d[2, 3, 0] = -np.inf
    yield case(PREFIX + "nonfinite_2d_float64", f64, rng.standard_normal((5, 6, 1)), d, "linear",
               "constant", extra={"fd": "non-finite coordinates have no derivative"})
    # integer coordinates and ties of nearest's rounding at .5 inside the grid (floor(x + 0.5):
    # up, as scipy), points outside that are not ties, and one far outside the grid (scipy
    # reflects a coordinate before it rounds, so an exact .5 tie outside the grid rounds the
    # other way there; nitrix rounds in the original coordinate: docs/geometry.md)
    d = np.stack(np.meshgrid(np.arange(0, 9) * 0.5, np.arange(0, 7) * 0.5, indexing="ij"), -1)
    d[0, :, 0] = np.linspace(-2.3, 9.2, 7)
    d[1, :, 1] = np.linspace(-3.2, 8.3, 7)
    d[2, 2] = (1e6 + 0.25, -1e6 - 0.25)
    yield case(PREFIX + "halfgrid_nearest_2d_float64", f64, rng.standard_normal((5, 4, 1)), d,
               "nearest", "mirror", extra={"fd": "nearest sampling is piecewise constant"})
