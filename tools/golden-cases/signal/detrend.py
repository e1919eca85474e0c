"""polynomial_detrend: x minus numpy.polyfit(t, x, degree) evaluated by numpy.polyval, per series,
in float64 (t = 0..n-1; the residual does not depend on how t is scaled)."""
import numpy as np

PREFIX = "detrend_"


def detrend(x, degree, axis):
    xm = np.moveaxis(x.astype(np.float64), axis, -1)
    n = xm.shape[-1]
    t = np.arange(n, dtype=np.float64)
    flat = xm.reshape(-1, n)
    out = np.empty_like(flat)
    for i, row in enumerate(flat):
        out[i] = row - np.polyval(np.polyfit(t, row, degree), t)
    return np.moveaxis(out.reshape(xm.shape), -1, axis)


def cases(rng):
    def case(tag, dt, shape, degree, rowvar=True):
        t = np.arange(shape[-1 if rowvar else -2], dtype=np.float64)
        trend = 3.0 + 0.5 * t - 0.01 * t ** 2
        x = rng.standard_normal(shape) + np.expand_dims(trend, -1 if not rowvar else 0)
        x = x.astype(dt)
        opts = [("degree", degree)]
        if not rowvar:
            opts.append(("rowvar", "false"))
        return dict(name=f"detrend_{tag}_{np.dtype(dt).name}", op="polynomial_detrend",
                    dtype=dt, inputs=[("x.npy", x)],
                    outputs=[("out.npy", detrend(x, degree, -1 if rowvar else -2).astype(dt))],
                    options=opts, generator="numpy.polyfit + numpy.polyval in float64")

    yield case("a_linear", np.float64, (4, 50), 1)
    yield case("b_quadratic_cols", np.float64, (2, 40, 3), 2, rowvar=False)
    yield case("c_mean", np.float64, (3, 7), 0)
    yield case("d_cubic", np.float64, (60,), 3)
    yield case("a_linear", np.float32, (4, 50), 1)
