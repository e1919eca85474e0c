"""Spatial and window math (docs/numerics.md): numpy.pad for pad_to_multiple (the border names
map onto numpy's: constant, reflect -> symmetric, mirror -> reflect, nearest -> edge, wrap),
slices for crop_to_multiple, numpy.nonzero for the bounding box, the Gaussian window's closed form
and the overlap-add division, all written here in float64 NumPy."""
import numpy as np

PREFIX = "spatial_"
NP_MODE = {"constant": "constant", "reflect": "symmetric", "mirror": "reflect",
           "nearest": "edge", "wrap": "wrap"}


def name(op, tag, dt):
    return f"spatial_{op}_{tag}_{np.dtype(dt).name}"


def split_pads(shape, mult):
    pads = []
    for s, m in zip(shape, mult):
        t = (m - s % m) % m
        pads.append((t // 2, t - t // 2))
    return pads


def pad_cases(rng):
    for dt in (np.float64, np.float32):
        x = rng.standard_normal((5, 7)).astype(dt)
        for tag, mode, mult, opts in (("a_reflect", "reflect", (4, 4), []),
                                      ("b_constant", "constant", (4, 4), [("cval", "1.5")]),
                                      ("c_mirror_per_axis", "mirror", (3, 4), []),
                                      ("d_nearest", "nearest", (8, 8), []),
                                      ("e_wrap", "wrap", (6, 5), [])):
            pads = split_pads(x.shape, mult)
            kw = {"constant_values": 1.5} if mode == "constant" else {}
            y = np.pad(x.astype(np.float64), pads, mode=NP_MODE[mode], **kw)
            m = ",".join(map(str, mult)) if len(set(mult)) > 1 else str(mult[0])
            yield dict(name=name("pad_to_multiple", tag, dt), op="pad_to_multiple", dtype=dt,
                       inputs=[("x.npy", x)],
                       outputs=[("y.npy", y.astype(dt)), ("pads.npy", np.array(pads, np.int64))],
                       options=[("multiple", m), ("mode", mode)] + opts,
                       generator=f"numpy.pad(x, (t // 2, t - t // 2), mode='{NP_MODE[mode]}'), "
                                 "t = (m - s % m) % m")
        x3 = rng.standard_normal((2, 5, 6)).astype(dt)
        pads = split_pads(x3.shape[1:], (8, 8))
        y = np.pad(x3.astype(np.float64), [(0, 0)] + pads)
        yield dict(name=name("pad_to_multiple", "f_spatial_rank2", dt), op="pad_to_multiple",
                   dtype=dt, inputs=[("x.npy", x3)],
                   outputs=[("y.npy", y.astype(dt)), ("pads.npy", np.array(pads, np.int64))],
                   options=[("multiple", "8"), ("spatial_rank", "2")],
                   generator="numpy.pad of the last two axes to multiples of 8, zeros")
    xi = rng.randint(-50, 50, size=(3, 10)).astype(np.int32)
    pads = split_pads(xi.shape, (4, 4))
    yield dict(name=name("pad_to_multiple", "g_int", np.int32), op="pad_to_multiple",
               dtype=np.int32, inputs=[("x.npy", xi)],
               outputs=[("y.npy", np.pad(xi, pads, mode="edge")),
                        ("pads.npy", np.array(pads, np.int64))],
               options=[("multiple", "4"), ("mode", "nearest")],
               generator="numpy.pad(x, ..., mode='edge') of an int32 array")


def crop_cases(rng):
    for dt in (np.float64, np.float32):
        x = rng.standard_normal((9, 10, 3)).astype(dt)
        y = x[0:8, 1:9, :]
        yield dict(name=name("crop_to_multiple", "a_rank2", dt), op="crop_to_multiple", dtype=dt,
                   inputs=[("x.npy", x)], outputs=[("y.npy", y)],
                   options=[("multiple", "4,4,3")],
                   generator="slices x[e//2 : e//2 + s - e] with e = s % m per axis")
        y2 = x[:, 1:9, 0:2]
        yield dict(name=name("crop_to_multiple", "b_spatial_rank2", dt), op="crop_to_multiple",
                   dtype=dt, inputs=[("x.npy", x)], outputs=[("y.npy", y2)],
                   options=[("multiple", "4,2"), ("spatial_rank", "2")],
                   generator="slices of the last two axes: e = s % m, x[e//2 : e//2 + s - e]")
    xi = rng.randint(0, 9, size=(7, 6)).astype(np.int32)
    yield dict(name=name("crop_to_multiple", "c_int", np.int32), op="crop_to_multiple",
               dtype=np.int32, inputs=[("x.npy", xi)], outputs=[("y.npy", xi[0:6, 1:5])],
               options=[("multiple", "3,4")], generator="slices x[0:6, 1:5] (e = 1, 2: e // 2 = 0, 1 cut before)")


def bbox_cases(rng):
    def box(a, thr):
        nz = np.nonzero(np.abs(a.astype(np.float64)) > thr)
        if nz[0].size == 0:
            return np.zeros(a.ndim, np.int64), np.zeros(a.ndim, np.int64)
        return (np.array([i.min() for i in nz], np.int64),
                np.array([i.max() + 1 for i in nz], np.int64))
    for dt in (np.float64, np.float32):
        x = np.zeros((7, 8, 6), dt)
        x[2:5, 3:7, 1:2] = rng.standard_normal((3, 4, 1))
        x[2, 3, 1] = -4.0
        lo, hi = box(x, 0)
        yield dict(name=name("nonzero_bounding_box", "a_blob", dt), op="nonzero_bounding_box",
                   dtype=dt, inputs=[("x.npy", x)], outputs=[("lo.npy", lo), ("hi.npy", hi)],
                   generator="numpy.nonzero(x): min and max + 1 of the indices per axis")
        x2 = rng.uniform(0, 1, size=(6, 9)).astype(dt)
        lo, hi = box(x2, 0.9)
        yield dict(name=name("nonzero_bounding_box", "b_threshold", dt),
                   op="nonzero_bounding_box", dtype=dt, inputs=[("x.npy", x2)],
                   outputs=[("lo.npy", lo), ("hi.npy", hi)], options=[("threshold", "0.9")],
                   generator="numpy.nonzero(|x| > 0.9): min and max + 1 per axis")
        z = np.zeros((4, 5), dt)
        yield dict(name=name("nonzero_bounding_box", "c_allzero", dt), op="nonzero_bounding_box",
                   dtype=dt, inputs=[("x.npy", z)],
                   outputs=[("lo.npy", np.zeros(2, np.int64)), ("hi.npy", np.zeros(2, np.int64))],
                   generator="the op's documented rule: no element passes -> lo = hi = 0")
    m = np.zeros((5, 6, 7), bool)
    m[1, 2:4, 6] = True
    m[3, 5, 0] = True
    lo, hi = box(m, 0)
    yield dict(name=name("nonzero_bounding_box", "d_bool", bool), op="nonzero_bounding_box",
               dtype=bool, inputs=[("x.npy", m)], outputs=[("lo.npy", lo), ("hi.npy", hi)],
               generator="numpy.nonzero of a bool mask: min and max + 1 per axis")
    u = np.zeros((10,), np.uint8)
    u[[3, 7]] = [200, 1]
    lo, hi = box(u, 0)
    yield dict(name=name("nonzero_bounding_box", "e_u8", np.uint8), op="nonzero_bounding_box",
               dtype=np.uint8, inputs=[("x.npy", u)], outputs=[("lo.npy", lo), ("hi.npy", hi)],
               generator="numpy.nonzero of a uint8 vector (200 and 1)")


def window(shape, scale):
    w = np.ones(shape)
    for d, s in enumerate(shape):
        i = np.arange(s, dtype=np.float64)
        c = (s - 1) / 2
        sig = scale * s
        v = np.exp(-(i - c) ** 2 / (2 * sig ** 2))
        v = v / v.max()
        sh = [1] * len(shape)
        sh[d] = s
        w = w * v.reshape(sh)
    return w


def window_cases(rng):
    del rng
    yield dict(name=name("gaussian_window", "a_default", np.float32), op="gaussian_window",
               dtype=np.float32, inputs=[], outputs=[("w.npy", window((5, 6), 0.125)
                                                       .astype(np.float32))],
               options=[("shape", "5,6")],
               generator="numpy float64 prod_d exp(-(i - (s-1)/2)^2 / (2 (s/8)^2)), each axis "
                         "divided by its largest sample")
    yield dict(name=name("gaussian_window", "b_3d", np.float64), op="gaussian_window",
               dtype=np.float64, inputs=[], outputs=[("w.npy", window((7, 8, 4), 0.25))],
               options=[("shape", "7,8,4"), ("sigma_scale", "0.25"), ("dtype", "float64")],
               generator="numpy float64 prod_d exp(-(i - (s-1)/2)^2 / (2 (s/4)^2)), each axis "
                         "divided by its largest sample")


def overlap_cases(rng):
    for dt in (np.float64, np.float32):
        w = rng.uniform(0.5, 3.0, size=(4, 5)).astype(dt)
        w[0, :2] = 0
        s = (rng.standard_normal((2, 4, 5)) * w).astype(dt)
        W = np.maximum(w.astype(np.float64), 1e-8)
        yield dict(name=name("overlap_add", "a_broadcast", dt), op="overlap_add", dtype=dt,
                   inputs=[("weighted_sum.npy", s), ("weight.npy", w)],
                   outputs=[("y.npy", (s.astype(np.float64) / W).astype(dt))],
                   generator="numpy float64 weighted_sum / maximum(weight, 1e-8), broadcast")
        w2 = rng.uniform(0.01, 0.1, size=(3, 6)).astype(dt)
        s2 = rng.standard_normal((3, 6)).astype(dt)
        W2 = np.maximum(w2.astype(np.float64), 0.05)
        yield dict(name=name("overlap_add", "b_eps", dt), op="overlap_add", dtype=dt,
                   inputs=[("weighted_sum.npy", s2), ("weight.npy", w2)],
                   outputs=[("y.npy", (s2.astype(np.float64) / W2).astype(dt))],
                   options=[("eps", "0.05")],
                   generator="numpy float64 weighted_sum / maximum(weight, 0.05)")


def cases(rng):
    yield from pad_cases(rng)
    yield from crop_cases(rng)
    yield from bbox_cases(rng)
    yield from window_cases(rng)
    yield from overlap_cases(rng)
