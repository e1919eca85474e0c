"""compose_displacement and integrate_velocity_field: scipy.ndimage.map_coordinates(order=1)
of each component at id + u (mode nearest: scipy's own), in float64 loops of NumPy."""
import numpy as np
import scipy.ndimage as ndi

PREFIX = "fields_"
SCIPY_MODE = {"constant": "grid-constant", "nearest": "nearest", "wrap": "grid-wrap",
              "mirror": "mirror", "reflect": "reflect"}


def compose(outer, inner, mode="nearest", cval=0.0):
    nd = inner.shape[-1]
    grid = np.stack(np.indices(inner.shape[:-1]), -1).astype(np.float64)
    pts = np.moveaxis(grid + inner, -1, 0)
    comp = np.stack([ndi.map_coordinates(outer[..., a], pts, order=1, mode=SCIPY_MODE[mode],
                                         cval=cval) for a in range(nd)], -1)
    return inner + comp


def integrate(v, n, mode="nearest", cval=0.0):
    u = v / 2.0**n
    for _ in range(n):
        u = compose(u, u, mode, cval)
    return u


def smooth_field(rng, sp, amp):
    nd = len(sp)
    f = rng.standard_normal(sp + (nd,))
    f = np.stack([ndi.gaussian_filter(f[..., a], 1.5) for a in range(nd)], -1)
    return amp * f / np.abs(f).max()


def cases(rng):
    f64, f32 = np.float64, np.float32
    a, b = smooth_field(rng, (6, 5, 4), 1.5), smooth_field(rng, (6, 5, 4), 1.5)
    yield dict(op="compose_displacement", dtype=f64, name=PREFIX + "0_compose_3d_float64",
               inputs=[("outer.npy", a), ("inner.npy", b)], outputs=[("u.npy", compose(a, b))],
               options=[], generator="inner + map_coordinates(outer, id + inner, order=1, nearest)")
    a, b = smooth_field(rng, (7, 6), 2.0), smooth_field(rng, (7, 6), 2.0)
    yield dict(op="compose_displacement", dtype=f64, name=PREFIX + "1_compose_2d_wrap_float64",
               inputs=[("outer.npy", a), ("inner.npy", b)],
               outputs=[("u.npy", compose(a, b, "wrap"))], options=[("mode", "wrap")],
               generator="inner + map_coordinates(outer, id + inner, order=1, grid-wrap)")
    a, b = smooth_field(rng, (9,), 2.0).astype(f32), smooth_field(rng, (9,), 2.0).astype(f32)
    yield dict(op="compose_displacement", dtype=f32, name=PREFIX + "compose_1d_float32",
               inputs=[("outer.npy", a), ("inner.npy", b)],
               outputs=[("u.npy", compose(a.astype(f64), b.astype(f64)).astype(f32))],
               options=[], generator="inner + map_coordinates(outer, id + inner, order=1)")
    v = smooth_field(rng, (6, 5, 4), 1.2)
    yield dict(op="integrate_velocity_field", dtype=f64, name=PREFIX + "0_integrate_3d_float64",
               inputs=[("v.npy", v)], outputs=[("u.npy", integrate(v, 3))],
               options=[("n_steps", 3)],
               generator="scaling and squaring, 3 steps, map_coordinates(order=1, nearest)")
    v = smooth_field(rng, (8, 7), 3.0)
    n = int(np.clip(np.ceil(np.log2(2 * np.abs(v).max())), 1, 12))
    yield dict(op="integrate_velocity_field", dtype=f64, name=PREFIX + "1_integrate_auto_float64",
               inputs=[("v.npy", v)], outputs=[("u.npy", integrate(v, n))],
               options=[("n_steps", "auto")],
               generator=f"scaling and squaring, auto = {n} steps, map_coordinates(order=1)")
    v = smooth_field(rng, (6, 7), 2.0).astype(f32)
    yield dict(op="integrate_velocity_field", dtype=f32, name=PREFIX + "integrate_2d_float32",
               inputs=[("v.npy", v)], outputs=[("u.npy", integrate(v.astype(f64), 7).astype(f32))],
               options=[], generator="scaling and squaring, 7 steps, map_coordinates(order=1)")
    v = smooth_field(rng, (10,), 1.0)
    yield dict(op="integrate_velocity_field", dtype=f64, name=PREFIX + "integrate_1d_const_float64",
               inputs=[("v.npy", v)], outputs=[("u.npy", integrate(v, 4, "constant", 0.5))],
               options=[("n_steps", 4), ("mode", "constant"), ("cval", 0.5)],
               generator="scaling and squaring, 4 steps, map_coordinates(order=1, grid-constant)")
