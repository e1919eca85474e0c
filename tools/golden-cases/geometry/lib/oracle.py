"""Shared oracles of the geometry cases, all in float64 from scipy.ndimage and NumPy, never nitrix.

nitrix's border modes are scipy's with the grid meanings: constant = 'grid-constant' (the image
extended by cval, interpolated across the edge), wrap = 'grid-wrap' (period n); nearest, mirror
and reflect are scipy's own. cubic_bspline's coefficients are always the mirror prefilter's
(spline_filter(order=3, mode='mirror')), extended by the mode for the evaluation; with
mode=mirror that is map_coordinates(order=3, mode='mirror') itself."""
import numpy as np
import scipy.ndimage as ndi

SCIPY_MODE = {"constant": "grid-constant", "nearest": "nearest", "wrap": "grid-wrap",
              "mirror": "mirror", "reflect": "reflect"}
NUMPY_PAD = {"constant": "constant", "nearest": "edge", "wrap": "wrap", "mirror": "reflect",
             "reflect": "symmetric"}


def map_points(img, pts, order, mode, cval=0.0):
    """img [*sp] float64, pts [..., nd] -> [...]: scipy's sampling (order 0, 1, 3)."""
    c = np.moveaxis(np.asarray(pts, np.float64), -1, 0)
    img = np.asarray(img, np.float64)
    if order == 3:
        if mode == "mirror":
            return ndi.map_coordinates(img, c, order=3, mode="mirror")
        coef = ndi.spline_filter(img, order=3, mode="mirror")
        return ndi.map_coordinates(coef, c, order=3, mode=SCIPY_MODE[mode], cval=cval,
                                   prefilter=False)
    return ndi.map_coordinates(img, c, order=order, mode=SCIPY_MODE[mode], cval=cval)


def lanczos_w(d, a):
    return np.where(np.abs(d) < a, np.sinc(d) * np.sinc(d / a), 0.0)


def catmull_w(d):
    t = np.abs(d)
    return np.where(t < 1, 1.5 * t**3 - 2.5 * t**2 + 1,
                    np.where(t < 2, -0.5 * t**3 + 2.5 * t**2 - 4 * t + 2, 0.0))


def kernel_points(img, pts, kind, mode, cval=0.0, a=3):
    """Closed-form separable kernels on the image padded by numpy.pad (the border rule written
    independently of any folding): lanczos(a) renormalised per axis, or catmull-rom (Keys, a=-1/2).
    img [*sp], pts [N, nd] -> [N]."""
    img = np.asarray(img, np.float64)
    nd = img.ndim
    M = 40
    kw = {"constant_values": cval} if mode == "constant" else {}
    p = np.pad(img, M, mode=NUMPY_PAD[mode], **kw)
    T, off = (2 * a, 1 - a) if kind == "lanczos" else (4, -1)
    out = np.zeros(len(pts))
    for n, x in enumerate(np.asarray(pts, np.float64)):
        ws, ids = [], []
        for ax in range(nd):
            b = np.floor(x[ax])
            i = b + off + np.arange(T)
            d = x[ax] - i
            w = lanczos_w(d, a) if kind == "lanczos" else catmull_w(d)
            if kind == "lanczos":
                w = w / w.sum()
            ws.append(w)
            ids.append(i.astype(np.int64) + M)
        acc = 0.0
        for idx in np.ndindex(*([T] * nd)):
            wt = np.prod([ws[ax][idx[ax]] for ax in range(nd)])
            acc += wt * p[tuple(ids[ax][idx[ax]] for ax in range(nd))]
        out[n] = acc
    return out


def sample(img, pts, method, mode, cval=0.0, order=3, labels=None):
    """img [*sp, C], pts [..., nd] -> [..., C] by nitrix's method names."""
    img = np.asarray(img, np.float64)
    C = img.shape[-1]
    lead = pts.shape[:-1]
    flat = pts.reshape(-1, pts.shape[-1])
    out = np.zeros((flat.shape[0], C))
    for ch in range(C):
        im = img[..., ch]
        if method in ("linear", "nearest", "cubic_bspline"):
            o = {"nearest": 0, "linear": 1, "cubic_bspline": 3}[method]
            out[:, ch] = map_points(im, flat, o, mode, cval)
        elif method in ("lanczos", "catmull_rom"):
            out[:, ch] = kernel_points(im, flat, method, mode, cval, order)
        elif method == "multilabel":
            ind = [map_points((im == lab).astype(np.float64), flat, 1, mode,
                              float(cval == lab)) for lab in labels]
            out[:, ch] = np.asarray(labels, np.float64)[np.argmax(np.stack(ind), axis=0)]
    bad = ~np.all(np.isfinite(flat), axis=-1)
    out[bad] = np.nan
    return out.reshape(lead + (C,))
