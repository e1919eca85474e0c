"""Grid-difference ops of the geometry family: oracles in float64 NumPy/SciPy, never nitrix.

jacobian_displacement / jacobian_det_displacement: the central difference over numpy.pad
(edge = nearest, wrap, reflect = scipy mirror, symmetric = scipy reflect, constant 0), then
numpy.linalg.det. spatial_gradient: scipy.ndimage.correlate1d([-1, 0, 1] / 2h) in the op's mode,
scipy.ndimage.sobel / (2 4^(r-1) h), and the scharr stencil as correlate1d passes.
center_of_mass_grid: scipy.ndimage.center_of_mass, and the weighted mean of the indices."""
import numpy as np
import scipy.ndimage as ndi

PREFIX = "fd_"

NP_MODE = {"nearest": "edge", "wrap": "wrap", "mirror": "reflect", "reflect": "symmetric",
           "constant": "constant"}


def central_np(u, axis, mode, h):
    pad = [(0, 0)] * u.ndim
    pad[axis] = (1, 1)
    p = np.pad(u, pad, mode=NP_MODE[mode])
    n = u.shape[axis]
    return (np.take(p, np.arange(2, n + 2), axis) - np.take(p, np.arange(0, n), axis)) / (2 * h)


def jacobian_np(u, mode, h):
    d = u.shape[-1]
    first = u.ndim - 1 - d
    cols = [central_np(u, first + j, mode, h[j]) for j in range(d)]
    return np.stack(cols, -1) + np.eye(d)


def cases(rng):
    out = []
    for dt in (np.float64, np.float32):
        tn = np.dtype(dt).name
        # 3-D displacement with a leading batch axis, anisotropic spacing, every mode.
        u = 0.4 * rng.standard_normal((2, 5, 6, 4, 3))
        for mode in ("nearest", "wrap", "mirror", "reflect", "constant"):
            if dt == np.float32 and mode not in ("nearest", "wrap"):
                continue
            h = (1.0, 0.5, 2.0)
            j = jacobian_np(u, mode, h)
            opts = [("boundary_mode", mode), ("spacing", "1,0.5,2")]
            out.append(dict(name=f"fd_jacobian_displacement_3d_{mode}_{tn}",
                            op="jacobian_displacement", dtype=dt,
                            inputs=[("u.npy", u.astype(dt))], outputs=[("J.npy", j.astype(dt))],
                            options=opts, generator=f"numpy.pad({NP_MODE[mode]}) central "
                            "differences + I"))
            out.append(dict(name=f"fd_jacobian_det_displacement_3d_{mode}_{tn}",
                            op="jacobian_det_displacement", dtype=dt,
                            inputs=[("u.npy", u.astype(dt))],
                            outputs=[("det.npy", np.linalg.det(j).astype(dt))], options=opts,
                            generator=f"numpy.linalg.det of numpy.pad({NP_MODE[mode]}) central "
                            "differences + I"))
        u2 = 0.5 * rng.standard_normal((7, 5, 2))
        j2 = jacobian_np(u2, "nearest", (1.0, 1.0))
        out.append(dict(name=f"fd_jacobian_displacement_2d_{tn}", op="jacobian_displacement",
                        dtype=dt, inputs=[("u.npy", u2.astype(dt))],
                        outputs=[("J.npy", j2.astype(dt))],
                        generator="numpy.pad(edge) central differences + I"))
        out.append(dict(name=f"fd_jacobian_det_displacement_2d_{tn}",
                        op="jacobian_det_displacement", dtype=dt,
                        inputs=[("u.npy", u2.astype(dt))],
                        outputs=[("det.npy", np.linalg.det(j2).astype(dt))],
                        generator="numpy.linalg.det of numpy.pad(edge) central differences + I"))
        # spatial_gradient.
        x = rng.standard_normal((2, 6, 5, 7))
        for mode in ("nearest", "reflect", "wrap"):
            h = (1.0, 2.0, 0.5)
            g = np.stack([ndi.correlate1d(x, np.array([-1.0, 0.0, 1.0]) / (2 * h[k]), axis=1 + k,
                                          mode=mode) for k in range(3)], -1)
            out.append(dict(name=f"fd_spatial_gradient_central_{mode}_{tn}",
                            op="spatial_gradient", dtype=dt, inputs=[("image.npy", x.astype(dt))],
                            outputs=[("grad.npy", g.astype(dt))],
                            options=[("spatial_rank", "3"), ("mode", mode),
                                     ("spacing", "1,2,0.5")],
                            generator=f"scipy.ndimage.correlate1d([-1, 0, 1] / 2h, mode={mode})"))
        x2 = rng.standard_normal((8, 9))
        for mode in ("nearest", "mirror", "constant"):
            g = np.stack([ndi.sobel(x2, axis=k, mode=mode) / 8.0 for k in range(2)], -1)
            out.append(dict(name=f"fd_spatial_gradient_sobel_{mode}_{tn}",
                            op="spatial_gradient", dtype=dt, inputs=[("image.npy", x2.astype(dt))],
                            outputs=[("grad.npy", g.astype(dt))],
                            options=[("scheme", "sobel"), ("mode", mode)],
                            generator=f"scipy.ndimage.sobel(mode={mode}) / (2 * 4)"))
        x3 = rng.standard_normal((5, 6, 4))
        comps = []
        for k in range(3):
            y = ndi.correlate1d(x3, np.array([-1.0, 0.0, 1.0]) / 2.0, axis=k, mode="nearest")
            for j in range(3):
                if j != k:
                    y = ndi.correlate1d(y, np.array([3.0, 10.0, 3.0]) / 16.0, axis=j,
                                        mode="nearest")
            comps.append(y)
        out.append(dict(name=f"fd_spatial_gradient_scharr_{tn}", op="spatial_gradient", dtype=dt,
                        inputs=[("image.npy", x3.astype(dt))],
                        outputs=[("grad.npy", np.stack(comps, -1).astype(dt))],
                        options=[("scheme", "scharr")],
                        generator="scipy.ndimage.correlate1d: [-1, 0, 1] / 2, [3, 10, 3] / 16"))
        # center_of_mass_grid.
        w = rng.uniform(0.0, 1.0, size=(6, 5, 7))
        out.append(dict(name=f"fd_center_of_mass_grid_all_{tn}", op="center_of_mass_grid",
                        dtype=dt, inputs=[("weight.npy", w.astype(dt))],
                        outputs=[("com.npy", np.array(ndi.center_of_mass(w)).astype(dt))],
                        generator="scipy.ndimage.center_of_mass"))
        wb = rng.uniform(0.0, 1.0, size=(3, 4, 6, 5))
        for tag, zero in (("axes", False), ("zeroslice", True)):
            wz = wb.copy()
            if zero:
                wz[1] = 0.0
            num = [(wz * np.arange(wz.shape[a]).reshape([-1 if i == a else 1 for i in range(4)])
                    ).sum((2, 3)) for a in (3, 2)]
            den = wz.sum((2, 3))
            com = np.stack([np.where(den == 0, -1.0, n / np.where(den == 0, 1, den))
                            for n in num], -1)
            out.append(dict(name=f"fd_center_of_mass_grid_{tag}_{tn}", op="center_of_mass_grid",
                            dtype=dt, inputs=[("weight.npy", wz.astype(dt))],
                            outputs=[("com.npy", com.astype(dt))],
                            options=[("axes", "-1,-2"), ("na_value", "-1")],
                            generator="numpy sum(i w) / sum(w) per slice, -1 where sum(w) = 0"))
    return out
