"""sample_at_points, spatial_transform_batched, resample and identity_grid: scipy.ndimage
map_coordinates (orders 0, 1, 3), the closed forms of lib/oracle.py, numpy.indices."""
import importlib.util
import os

import numpy as np

_spec = importlib.util.spec_from_file_location(
    "geo_oracle", os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "oracle.py"))
orc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(orc)

PREFIX = "points_"


def cases(rng):
    f64, f32 = np.float64, np.float32
    # sample_at_points: volume with and without a channel axis
    vol = rng.standard_normal((6, 5, 7))
    pts = np.stack([rng.uniform(-2, n + 1, size=(4, 3)) for n in vol.shape], -1)
    y = orc.sample(vol[..., None], pts, "linear", "nearest")[..., 0]
    yield dict(op="sample_at_points", dtype=f64, name=PREFIX + "0_sample_linear_3d_float64",
               inputs=[("volume.npy", vol), ("points.npy", pts)], outputs=[("out.npy", y)],
               options=[("method", "linear"), ("mode", "nearest")],
               generator="scipy.ndimage.map_coordinates(order=1, mode='nearest')")
    vol = rng.standard_normal((8, 7, 2))
    pts = np.stack([rng.uniform(-2, n + 1, size=(9,)) for n in vol.shape[:2]], -1)
    y = orc.sample(vol, pts, "cubic_bspline", "reflect")
    yield dict(op="sample_at_points", dtype=f64, name=PREFIX + "1_sample_cubic_2d_float64",
               inputs=[("volume.npy", vol), ("points.npy", pts)], outputs=[("out.npy", y)],
               options=[("method", "cubic_bspline"), ("mode", "reflect")],
               generator="scipy spline_filter(mirror) + map_coordinates(order=3, reflect)")
    for dt in (f64, f32):
        t = np.dtype(dt).name
        vol = rng.standard_normal((12,)).astype(dt)
        pts = rng.uniform(-4, 15, size=(20, 1)).astype(dt)
        y = orc.sample(vol[:, None].astype(f64), pts.astype(f64), "nearest", "wrap")[..., 0]
        yield dict(op="sample_at_points", dtype=dt, name=PREFIX + f"sample_nearest_1d_{t}",
                   inputs=[("volume.npy", vol), ("points.npy", pts)],
                   outputs=[("out.npy", y.astype(dt))],
                   options=[("method", "nearest"), ("mode", "wrap")],
                   generator="scipy.ndimage.map_coordinates(order=0, mode='grid-wrap')")
    # spatial_transform_batched: one image under two deformations, two images under one
    img = rng.standard_normal((1, 6, 5, 2))
    d = np.stack([rng.uniform(-1, n, size=(3, 4, 4)) for n in (6, 5)], -1)
    y = np.stack([orc.sample(img[0], d[b], "linear", "constant", 0.25) for b in range(3)])
    yield dict(op="spatial_transform_batched", dtype=f64,
               name=PREFIX + "0_batched_shared_image_float64",
               inputs=[("image.npy", img), ("deformation.npy", d)], outputs=[("out.npy", y)],
               options=[("mode", "constant"), ("cval", 0.25)],
               generator="scipy.ndimage.map_coordinates(order=1, mode='grid-constant') per batch")
    img = rng.standard_normal((2, 7, 6, 1))
    d = np.stack([rng.uniform(-1, n, size=(1, 5, 3)) for n in (7, 6)], -1)
    y = np.stack([orc.sample(img[b], d[0], "catmull_rom", "mirror") for b in range(2)])
    yield dict(op="spatial_transform_batched", dtype=f64,
               name=PREFIX + "1_batched_shared_field_float64",
               inputs=[("image.npy", img), ("deformation.npy", d)], outputs=[("out.npy", y)],
               options=[("method", "catmull_rom"), ("mode", "mirror")],
               generator="closed-form catmull-rom on numpy.pad(reflect) per batch")
    img = rng.standard_normal((2, 5, 6, 4, 1)).astype(f32)
    d = np.stack([rng.uniform(-1, n, size=(2, 3, 3, 3)) for n in (5, 6, 4)], -1).astype(f32)
    y = np.stack([orc.sample(img[b].astype(f64), d[b].astype(f64), "cubic_bspline", "nearest")
                  for b in range(2)])
    yield dict(op="spatial_transform_batched", dtype=f32, name=PREFIX + "batched_cubic_float32",
               inputs=[("image.npy", img), ("deformation.npy", d)],
               outputs=[("out.npy", y.astype(f32))],
               options=[("method", "cubic_bspline"), ("mode", "nearest")],
               generator="scipy spline_filter(mirror) + map_coordinates(order=3, nearest)")
    # resample (aligned corners): up and down, coordinates j (n - 1) / (m - 1)
    for k, (dt, sp, tgt, meth, mode) in enumerate((
            (f64, (6, 5), (9, 3), "linear", "constant"),
            (f64, (5, 4, 6), (7, 3, 4), "cubic_bspline", "mirror"),
            (f32, (8,), (13,), "lanczos", "reflect"),
            (f32, (4, 6), (1, 8), "nearest", "nearest"))):
        t = np.dtype(dt).name
        img = rng.standard_normal(sp + (2,)).astype(dt)
        axes = [np.arange(m) * ((n - 1) / (m - 1) if m > 1 else 0.0) for n, m in zip(sp, tgt)]
        pts = np.stack(np.meshgrid(*axes, indexing="ij"), -1)
        y = orc.sample(img.astype(f64), pts, meth, mode)
        yield dict(op="resample", dtype=dt, name=PREFIX + f"{k}_resample_{meth}_{t}",
                   inputs=[("image.npy", img)], outputs=[("out.npy", y.astype(dt))],
                   options=[("target_shape", ",".join(map(str, tgt))), ("method", meth),
                            ("mode", mode)],
                   generator=f"map_coordinates / closed forms at j (n - 1) / (m - 1), {meth}")
    # identity_grid
    for dt, sp in ((f32, (3, 4, 2)), (f64, (5, 2)), (f64, (4,))):
        t = np.dtype(dt).name
        grid = np.stack(np.indices(sp), -1).astype(dt)
        yield dict(op="identity_grid", dtype=dt, name=PREFIX + f"identity_{len(sp)}d_{t}",
                   inputs=[], outputs=[("grid.npy", grid)],
                   options=[("spatial_shape", ",".join(map(str, sp))), ("dtype", t)],
                   generator="numpy.indices moved to the last axis")
